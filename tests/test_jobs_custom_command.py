"""Your own program as a job: from Python and from the CLI (``-- CMD ARGS``, ``--spec``), named
after itself, with its relative script path made absolute; and the run table's small items."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hpcprof_kit.cli import main
from hpcprof_kit.errors import SpecError
from hpcprof_kit.jobs import JobSpec, RunDir, list_runs


@pytest.fixture
def script_home(tmp_path, monkeypatch):
    """A folder holding mlp.py, as the current directory (where the user types the command)."""
    (tmp_path / "mlp.py").write_text("print('hi')\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _header(script: str) -> str:
    return next(line for line in script.splitlines() if line.endswith(": a custom command"))


def test_cli_renders_your_own_command_after_the_double_dash(script_home, capsys):
    assert main(["render", "--system", "local", "--", "python", "mlp.py", "--lr", "0.1"]) == 0
    script = capsys.readouterr().out
    assert script.splitlines()[-1].strip() == f"python {script_home / 'mlp.py'} --lr 0.1"
    assert _header(script) == "# mlp on local: a custom command"
    assert script == JobSpec(command=["python", "mlp.py", "--lr", "0.1"]).render()


def test_name_names_the_header_the_job_and_the_run(script_home, capsys):
    args = ["--system", "slurm", "--queue", "cpu", "--name", "sweep1", "--", "python", "mlp.py"]
    assert main(["render", *args]) == 0
    script = capsys.readouterr().out
    assert _header(script) == "# sweep1 on slurm: a custom command"
    assert "#SBATCH -J sweep1" in script.splitlines()
    unnamed = JobSpec(system="slurm", queue="cpu", command=["python", "mlp.py"])
    assert "#SBATCH -J hpcprof-mlp" in unnamed.render().splitlines()
    run = RunDir.create(JobSpec(command=["python", "mlp.py"], name="sweep1"))
    assert run.path.name.startswith("sweep1_local_N1_R2_")
    assert RunDir.create(unnamed).path.name.startswith("mlp_slurm_N1_R2_")


def test_words_starting_with_a_dash_are_arguments_for_the_example(capsys):
    assert main(["render", "--example", "seqpar", "--", "--steps", "3"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].strip() == (
        "python3 -m hpcprof_kit.apps.seqpar --steps 3"
    )


def test_spec_file_or_run_directory_then_the_flags_given(script_home, capsys):
    spec = JobSpec(system="local", command=["python", "mlp.py"], ranks_per_node=1, name="a1")
    (script_home / "spec.json").write_text(spec.to_json())
    assert main(["render", "--spec", "spec.json"]) == 0
    assert capsys.readouterr().out == spec.render()
    run = RunDir.create(spec)
    run.write_new("spec.json", spec.to_json())
    assert main(["render", "--spec", str(run.path), "--ranks-per-node", "3"]) == 0
    assert capsys.readouterr().out == spec.with_(ranks_per_node=3).render()
    assert main(["render", "--spec", "nothing.json"]) == 2
    assert capsys.readouterr().err == (
        "hpcprof-kit render: --spec nothing.json: cannot read nothing.json (No such file or "
        "directory); pass a spec.json file or a run directory holding one\n"
    )


def test_a_relative_script_is_made_absolute_where_it_exists(script_home, tmp_path_factory):
    spec = JobSpec(command=["python", "mlp.py"], args=["--data", "missing/x.bin"])
    assert spec.command == ("python", str(script_home / "mlp.py"))
    assert spec.args == ("--data", "missing/x.bin")  # nothing here by that name: left as given
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    os.chdir(elsewhere)  # a spec read back later, elsewhere, keeps the absolute path
    assert JobSpec.from_json(spec.to_json()).command == spec.command


def test_a_script_that_is_not_here_is_named_before_the_job_fails(script_home, capsys):
    assert main(["render", "--system", "local", "--", "python", "nothere.py"]) == 0
    assert capsys.readouterr().err == (
        f"hpcprof-kit render: warning: command word 'nothere.py' names no file in {script_home}, "
        "and the job runs in its run directory; give the script's absolute path (a relative "
        "one is made absolute only when the file is where you are)\n"
    )


def test_profile_on_your_own_command_is_refused(script_home, capsys):
    with pytest.raises(SpecError) as err:
        JobSpec(command=["python", "mlp.py"], profile=True).validate()
    assert str(err.value) == (
        "profile=True adds the train example's --profile flag, but command "
        f"['python', '{script_home / 'mlp.py'}'] is your own program; leave profile off and "
        "profile inside your script (hpcprof_kit.profiling.make_profiler), or put your "
        "program's own flag into command or args"
    )
    assert main(["render", "--profile", "--", "python", "mlp.py"]) == 2
    assert "profile=True adds the train example's --profile flag" in capsys.readouterr().err


def test_an_unknown_example_is_refused_with_or_without_a_command():
    for spec in (JobSpec(example="mlp"), JobSpec(example="mlp", command=["x"], profile=True)):
        with pytest.raises(SpecError) as err:
            spec.validate()
        assert str(err.value) == (
            "example 'mlp' is unknown (known: train, seqpar, affinity, pathologies, analyze); "
            "pick one of them, or run your own program: command=[...] in Python, '-- CMD ARGS' after hpcprof-kit "
            "render/submit (name='...' or --name names its run)"
        )
    assert JobSpec(example="mlp", command=["x"]).full_command() == ("x",)  # no KeyError


def test_runs_are_listed_oldest_first_whatever_their_names(isolated_runs):
    made = {}
    for name, created in (("zzz_local_N1_R1_20260101-120000", "2026-01-01T12:00:00+00:00"),
                          ("aaa_local_N1_R1_20260101-130000", "2026-01-01T13:00:00+00:00"),
                          ("aaa_local_N1_R1_20260101-120000-2", "2026-01-01T12:00:00+00:00"),
                          ("aaa_local_N1_R1_20260101-120000-10", "2026-01-01T12:00:00+00:00")):  # fmt: skip
        (isolated_runs / name).mkdir(parents=True)
        made[name] = {"created_at": created, "state": "COMPLETED"}
        (isolated_runs / name / "manifest.json").write_text(json.dumps(made[name]))
    assert [row["name"] for row in list_runs()] == [
        "zzz_local_N1_R1_20260101-120000",
        "aaa_local_N1_R1_20260101-120000-2",
        "aaa_local_N1_R1_20260101-120000-10",
        "aaa_local_N1_R1_20260101-130000",
    ]


@pytest.mark.mpi
def test_failed_status_shows_the_ranks_error(isolated_runs, capsys):
    fail = "import sys; print('step 1'); sys.exit('ValueError: rank 0 got no data')"
    code = main(["submit", "--system", "local", "--ranks-per-node", "1", "--binding", "none",
                 "--wait", "--", "python", "-c", fail])  # fmt: skip
    run_dir = capsys.readouterr().out.splitlines()[0].split(": ", 1)[1]
    assert code == 1
    assert main(["status", run_dir.rsplit("/", 1)[1]]) == 0  # by name, as 'runs' lists it
    job_id = json.loads(Path(run_dir, "manifest.json").read_text())["job_id"]
    assert capsys.readouterr().out == (
        f"FAILED  job {job_id}  exit code 1\n"
        f"stderr (last line, {run_dir}/stderr):\n"
        "  ValueError: rank 0 got no data\n"
    )


def test_status_of_an_unknown_run_says_where_it_looked(isolated_runs, capsys):
    assert main(["status", "nope_local_N1_R1"]) == 2
    assert capsys.readouterr().err == (
        f"hpcprof-kit status: no run directory 'nope_local_N1_R1' here or under the runs root "
        f"{isolated_runs}, and no run there has job id 'nope_local_N1_R1'; pass the run "
        "directory or job id that submit printed, or a name that 'hpcprof-kit runs' lists (set "
        "HPCPROF_RUNS_DIR to the runs root it was made under)\n"
    )
