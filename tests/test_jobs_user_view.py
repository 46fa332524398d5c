"""What a user reads from the command line about a job: ``hpcprof-kit explain``, ``submit
--wait`` on a job the scheduler says can never run, and ``status`` of a submission the
scheduler refused.

Local jobs run through the kit's local backend with real ranks. PBS cannot run here: its
tests put stand-ins for ``qsub`` and ``qstat`` on PATH; the ``qstat`` stand-in replays the
JSON a real OpenPBS 23.06 server printed (tests/fixtures/pbs/), and the ``qsub`` stand-in
refuses with the line and exit code that server gave (../shared/reference/openpbs/README.md).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from hpcprof_kit.cli import main
from hpcprof_kit.jobs.explain import CLI_ADVICE, CLI_NEVER_RUNS_ADVICE

PBS_JSON = Path(__file__).parent / "fixtures" / "pbs" / "openpbs_qstat_x_f_F_json.json"
CAN_NEVER = "Can Never Run: Not enough total nodes available"
MEANING = "the request can never fit this server: ask for fewer nodes or another queue"
PER_USER = "qsub: would exceed queue generic's per-user limit"


def _tool(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text(f"#!{sys.executable}\nimport json, sys\n{body}")
    path.chmod(0o755)


@pytest.fixture
def pbs_standin(tmp_path, monkeypatch):
    """``qsub`` that gives job 34.pbshost (or refuses as told) and ``qstat`` that answers for
    it with the real server's record of that job, still queued with its comment."""
    folder = tmp_path / "bin"
    folder.mkdir()
    jobs = json.loads(PBS_JSON.read_text())
    record = {k: v for k, v in jobs["Jobs"]["34.pbshost"].items() if k != "Exit_status"}
    record.update(job_state="Q", substate=10, comment=CAN_NEVER)
    answer = {k: v for k, v in jobs.items() if k != "Jobs"} | {"Jobs": {"34.pbshost": record}}
    (tmp_path / "answer.json").write_text(json.dumps(answer))
    _tool(folder, "qstat", f"print(open({str(tmp_path / 'answer.json')!r}).read())\n")
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")

    def qsub(refuse: tuple[int, str] | None = None) -> None:
        if refuse is None:
            _tool(folder, "qsub", "print('34.pbshost')\n")
        else:
            code, line = refuse
            _tool(folder, "qsub", f"sys.stderr.write({line + chr(10)!r}); sys.exit({code})\n")

    return qsub


AURORA = ["--system", "aurora", "--account", "P", "--backend", "pbs"]


def test_submit_wait_on_a_job_pbs_can_never_run_standin_says_why_and_exits_3(
    isolated_runs, pbs_standin, capsys
):
    pbs_standin()
    assert main(["submit", *AURORA, "--wait", "--", "true"]) == 3
    lines = capsys.readouterr().out.splitlines()
    run = lines[0].removeprefix("run directory: ")
    advice = CLI_NEVER_RUNS_ADVICE.format(run=run)
    assert lines[1:] == [
        "job id: 34.pbshost",
        "state: QUEUED",
        "job 34.pbshost has not ended: it is QUEUED",
        f"  scheduler's reason: {CAN_NEVER} ({MEANING})",
        f"  run directory: {run}",
        "  stderr is empty",
        f"  what to do: {advice}",
    ]
    assert "waiting will not help" in advice and f"hpcprof-kit cancel {run}" in advice
    # The same words from 'explain', found by the job id alone.
    assert main(["explain", "34.pbshost"]) == 0
    assert capsys.readouterr().out.splitlines() == lines[3:]


def test_status_of_a_submission_qsub_refused_standin_shows_qsubs_own_line(
    isolated_runs, pbs_standin, capsys
):
    pbs_standin(refuse=(38, PER_USER))
    assert main(["submit", *AURORA, "--", "true"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hpcprof-kit submit: qsub -o ") and err.endswith(f"{PER_USER}\n")
    (run,) = isolated_runs.iterdir()  # the run directory keeps what was tried
    expected = [
        "FAILED  never submitted: qsub refused it (exit 38)",
        "qsub said:",
        f"  {PER_USER}",
        f"what to do: change what was refused, then submit again: hpcprof-kit submit --spec "
        f"{run} (with the flags to change)",
    ]
    assert main(["status", str(run)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == expected and "submit()" not in out
    assert main(["explain", run.name]) == 0
    assert capsys.readouterr().out.splitlines() == expected
    assert main(["cancel", str(run)]) == 2
    assert capsys.readouterr().err == (
        f"hpcprof-kit cancel: {run} was never submitted (FAILED): there is nothing to cancel; "
        f"'hpcprof-kit status {run}' says why\n"
    )


def test_explain_a_failed_local_run_in_the_commands_words(isolated_runs, capsys):
    # Each rank writes its line, then waits for the other's (a file each in the run directory)
    # before it exits: a rank that exits first makes Hydra close the other's output, whose
    # write then dies of SIGPIPE (exit 141) instead of ending with the program's own 3.
    both = ('echo "rank $PMI_RANK: no such input" >&2; touch "wrote.$PMI_RANK"; '
            "until [ -e wrote.0 ] && [ -e wrote.1 ]; do sleep 0.05; done; exit 3")  # fmt: skip
    words = ["submit", "--system", "local", "--ranks-per-node", "2", "--binding", "none",
             "--wait", "--", "bash", "-c", both]  # fmt: skip
    assert main(words) == 1
    out = capsys.readouterr().out.splitlines()
    run = out[0].removeprefix("run directory: ")
    job_id = out[1].removeprefix("job id: ")
    assert out[2] == "state: FAILED (exit code 3)"
    assert out[3:5] == [f"job {job_id} ended FAILED", "  exit code: 3"]
    said = out[out.index("  last lines of stderr:") + 1 :][:2]
    assert sorted(said) == ["    | rank 0: no such input", "    | rank 1: no such input"]
    assert out[-1] == f"  what to do: {CLI_ADVICE['FAILED'].format(run=run)}"
    assert f"hpcprof-kit submit --spec {run}" in out[-1]
    assert main(["explain", run]) == 0
    assert capsys.readouterr().out.splitlines() == out[3:]  # no notebook line in a shell


def test_explain_of_an_unknown_job_says_what_to_pass(isolated_runs, capsys):
    assert main(["explain", "12345.nosuch"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hpcprof-kit explain: no run directory '12345.nosuch' here")
    assert "has job id '12345.nosuch'" in err and "HPCPROF_RUNS_DIR" in err


def test_sweep_wait_on_a_job_pbs_can_never_run_standin_says_so_and_exits_3(
    isolated_runs, pbs_standin, capsys
):
    # Aurora's debug queue takes one job per user: the two variants share job 34.pbshost.
    pbs_standin()
    words = ["sweep", *AURORA, "--vary=--seed=0,1", "--wait", "--", "true"]
    assert main(words) == 3
    lines = capsys.readouterr().out.splitlines()
    sweep_dir = lines[0].removeprefix("sweep ")
    assert lines[1:] == [
        f"  submitted job: 34.pbshost (hpcprof-kit sweep cancel {sweep_dir} ends every variant)",
        "    0 QUEUED     --seed=0",
        "    1 QUEUED     --seed=1",
        f"  variant 0 can never run as asked; the scheduler says: {CAN_NEVER}",
        f"  variant 1 can never run as asked; the scheduler says: {CAN_NEVER}",
        "  waiting will not help: cancel its job (hpcprof-kit cancel RUN_DIR), change the "
        "request (fewer --nodes, a shorter --walltime, another --queue) and sweep again",
    ]
