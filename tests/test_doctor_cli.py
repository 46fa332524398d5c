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
    # The local system has no vendor tracers and this venv no site module: one line per check.
    assert len(lines) == len(CHECKS) - 2
    names = [line.split()[1] for line in lines]
    assert names == [
        "python",
        "torch",
        "device",
        "launcher",
        "mpi4py",
        "scheduler",
        "jupyter",
        "trace",
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


def test_doctor_names_each_tracers_module_on_a_site(monkeypatch):
    monkeypatch.setenv("HPCPROF_SYSTEM", "aurora")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")  # no unitrace here
    result = run_cli("doctor")
    tracer = [ln for ln in result.stdout.splitlines() if " tracer unitrace " in ln]
    assert tracer == ["WARN tracer unitrace  not on PATH (module pti-gpu) -> fix: module load "
                      "pti-gpu; job scripts load it themselves"]  # fmt: skip


def test_doctor_warns_when_the_venv_was_built_on_another_module(tmp_path, monkeypatch):
    from hpcprof_kit import doctor

    (tmp_path / "hpcprof-site-module").write_text("frameworks/2025.2.0\n")
    monkeypatch.setattr(doctor.sys, "prefix", str(tmp_path))
    monkeypatch.setenv("LOADEDMODULES", "pti-gpu:frameworks/2025.3.1")
    (row,) = doctor._site_module()
    assert row.line() == (
        "WARN site module      venv built on frameworks/2025.2.0, frameworks/2025.3.1 is loaded now "
        "-> fix: module load frameworks/2025.2.0, or rebuild the venv on frameworks/2025.3.1"
    )
