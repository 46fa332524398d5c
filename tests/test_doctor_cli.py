"""The command line: every room's subcommands are there, and doctor prints one line per check."""

import json
import subprocess
import sys

from hpcprof_kit.cli import build_parser, main
from hpcprof_kit.doctor import CHECKS


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hpcprof_kit", *args], capture_output=True, text=True, timeout=120
    )


def test_doctor_prints_one_line_per_check():
    result = run_cli("doctor")
    lines = result.stdout.strip().splitlines()
    assert len(lines) == len(CHECKS)
    names = [line.split()[1] for line in lines]
    assert names == [
        "python",
        "torch",
        "device",
        "launcher",
        "mpi4py",
        "scheduler",
        "jupyter",
        "system",
    ]
    for line in lines:
        assert line.split()[0] in {"OK", "WARN", "FAIL"}, line
        if line.startswith(("WARN", "FAIL")) and "-> fix:" not in line:
            assert line.split()[1] in {"device"}, f"a problem line without a fix: {line}"
    assert result.returncode == (1 if any(x.startswith("FAIL") for x in lines) else 0)


def test_doctor_json_and_a_missing_launcher_gets_the_fix(monkeypatch, tmp_path, capsys):
    from hpcprof_kit import doctor

    monkeypatch.setattr(doctor, "find_mpiexec", lambda: None)
    code = main(["doctor", "--json"])
    rows = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert rows["launcher"]["status"] == "fail"
    assert "make env" in rows["launcher"]["fix"]
    assert code == 1


def test_help_lists_the_commands_and_unknown_input_fails_cleanly():
    commands = set(build_parser()._subparsers._group_actions[0].choices)
    assert {"doctor", "demo"} <= commands
    result = run_cli("no-such-command")
    assert result.returncode == 2 and "invalid choice" in result.stderr
