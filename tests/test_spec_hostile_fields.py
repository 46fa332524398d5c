"""Every string field of JobSpec, given shell and path metacharacters: either refused with the
kit's own error, or rendered into a script that bash parses, shellcheck passes, that runs
nothing but the program, and whose run directory stays under the runs root."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hpcprof_kit.errors import KitError
from hpcprof_kit.jobs import JobSpec, RunDir

SHELLCHECK = shutil.which("shellcheck", path=str(Path(sys.executable).parent)) or shutil.which(
    "shellcheck"
)
# Shell and path metacharacters, and a word that would run something if it ever reached a shell.
HOSTILE = st.lists(
    st.sampled_from(list("ab/.$`\"'\\;|&<>(){}*?!#~\n\t =%") + ["é", "touch PWNED"]),
    max_size=10,
).map("".join)
# setup lines are shell the user asked to run; command, args and tracer_args (test_tracer_options)
# have their own property tests.
STRING_FIELDS = sorted(
    f.name for f in fields(JobSpec)
    if f.name not in ("setup", "command", "args", "env", "tracer_args")
    and ("str" in str(f.type))
)  # fmt: skip


def test_the_property_covers_every_string_field():
    assert STRING_FIELDS == ["account", "binding", "capture_steps", "example", "filesystems",
                             "name", "queue", "reservation", "system", "tracer", "tracer_set",
                             "venv", "walltime"]  # fmt: skip


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(field=st.sampled_from(STRING_FIELDS), value=HOSTILE)
@example(field="example", value="../../x\ntouch PWNED #")
@example(field="system", value="../../etc/x")
@example(field="venv", value="$(touch PWNED)")
@example(field="venv", value="\\")  # found at random: HPCPROF_VENV='\\' (shellcheck SC1003)
@example(field="venv", value="=")  # found at random: HPCPROF_VENV== (shellcheck SC1097)
@example(field="name", value="ok;touch PWNED")
def test_hostile_value_in_any_string_field_is_refused_or_inert(field, value, tmp_path, mpiexec):
    base = {"system": "local", "ranks_per_node": 1, "binding": "none",
            "command": ["python3", "-c", "print('ran')"]}  # fmt: skip
    try:
        spec = JobSpec(**{**base, field: value})
        script = spec.render()
        run = RunDir.create(spec, runs_root=tmp_path / "runs")
    except KitError:
        return  # refused with the kit's own error: fine
    root = (tmp_path / "runs").resolve()
    assert run.path.resolve().parent == root  # the run directory never leaves the runs root
    (run.path / "job.sh").write_text(script)
    subprocess.run(["bash", "-n", "job.sh"], cwd=run.path, check=True)
    if SHELLCHECK:
        lint = subprocess.run([SHELLCHECK, "-s", "bash", "job.sh"], cwd=run.path,
                              capture_output=True, text=True)  # fmt: skip
        assert lint.returncode == 0, lint.stdout
    env = {**os.environ, "HPCPROF_RUN_DIR": str(run.path)}
    done = subprocess.run(["bash", "job.sh"], cwd=run.path, env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert not list(tmp_path.rglob("PWNED")) and not Path("PWNED").exists()
    if done.returncode == 0:
        assert done.stdout.splitlines() == ["ran"], (done.stdout, done.stderr)
    else:  # e.g. a venv that is a valid path but not there: the script's own one-line refusal
        assert done.stdout == "" and done.stderr.startswith("hpcprof-kit: "), done.stderr


@pytest.mark.parametrize("value", ["../x", "a/b", "x\ny", ""])
def test_a_system_name_is_never_a_path(value):
    from hpcprof_kit.errors import SystemError_
    from hpcprof_kit.systems import load_system

    with pytest.raises(SystemError_, match="is not a record name"):
        load_system(value)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("nodes", "1", "nodes '1' is not a whole number"),
        ("nodes", True, "nodes True is not a whole number"),
        ("ranks_per_node", "2", "ranks_per_node '2' is not a whole number"),
        ("ranks_per_node", False, "ranks_per_node False is not a whole number"),
    ],
)
def test_types_are_checked_before_ranges(field, value, message):
    with pytest.raises(KitError, match=message):
        JobSpec(system="local", **{field: value}).validate()


def test_a_file_the_cli_cannot_read_is_one_line(tmp_path, capsys):
    from hpcprof_kit.cli import main

    assert main(["traces", "summary", str(tmp_path / "missing.json")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("hpcprof-kit traces: ")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"name": "train\n"}, "name 'train\\\\n' is not safe"),
        ({"queue": "debug\n"}, "queue 'debug\\\\n' has characters"),
        ({"account": "P\n"}, "account 'P\\\\n' has characters"),
        ({"filesystems": "home\n"}, "filesystems 'home\\\\n' is not"),
        ({"env": {"X\n": "1"}}, "env name 'X\\\\n' is not a shell variable name"),
        ({"capture_steps": "3-5\n"}, "capture_steps '3-5\\\\n'"),
    ],
)
def test_a_trailing_newline_is_not_a_safe_word(fields, message):
    """A pattern ending in '$' also matches before a final newline: the checks end at the text's
    end, so a newline (a new line of script) never passes as part of a word."""
    with pytest.raises(KitError, match=message):
        JobSpec(system="local", **fields).validate()
