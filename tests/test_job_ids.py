"""``explain``, ``status`` and ``cancel`` find a run by its job id in every form the schedulers
print: PBS ``2``, ``2.server``, ``15[3]``, ``15[]`` (the whole array), Slurm ``1234_5`` (and
``1234``, its whole array). An id that matches several runs lists them and picks none.

The runs are manifests as submit and sweep leave them, in a final state (no scheduler is
asked: a final state is never polled again)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcprof_kit.cli import main as cli_main
from hpcprof_kit.jobs.rundir import RunDir


def run(root, name: str, **manifest) -> str:
    folder = root / name
    folder.mkdir(parents=True)
    RunDir(folder).update(**{"state": "COMPLETED", "exit_code": 0, **manifest})
    return str(folder)


@pytest.fixture
def runs(isolated_runs):
    root = isolated_runs
    return {
        "plain": run(root, "plain", backend="pbs", job_id="2.pbshost"),
        "other": run(root, "other", backend="pbs", job_id="21.pbshost"),
        "sub0": run(root, "sweep_a/v0", backend="pbs", job_id="15[0].pbshost",
                    array_job_id="15[].pbshost", sweep_index=0),
        "sub3": run(root, "sweep_a/v3", backend="pbs", job_id="15[3].pbshost",
                    array_job_id="15[].pbshost", sweep_index=3, state="FAILED", exit_code=3),
        "task5": run(root, "sweep_b/v5", backend="slurm", job_id="1234_5", array_job_id="1234",
                     sweep_index=5),
        "task6": run(root, "sweep_b/v6", backend="slurm", job_id="1234_6", array_job_id="1234",
                     sweep_index=6),
        "turn0": run(root, "sweep_c/v0", backend="pbs", job_id="16.pbshost",
                     array_job_id="16.pbshost", in_turn=True, sweep_index=0),
        "turn1": run(root, "sweep_c/v1", backend="pbs", job_id="16.pbshost",
                     array_job_id="16.pbshost", in_turn=True, sweep_index=1),
    }  # fmt: skip


@pytest.mark.parametrize(
    ("given", "line"),
    [
        ("2", "COMPLETED  job 2.pbshost  exit code 0"),
        ("2.pbshost", "COMPLETED  job 2.pbshost  exit code 0"),
        ("2.pbshost.example.org", "COMPLETED  job 2.pbshost  exit code 0"),
        ("15[3]", "FAILED  job 15[3].pbshost  exit code 3"),
        ("15[3].pbshost", "FAILED  job 15[3].pbshost  exit code 3"),
        ("1234_5", "COMPLETED  job 1234_5  exit code 0"),
    ],
)
def test_status_finds_a_run_by_its_id_in_the_form_the_scheduler_printed(runs, capsys, given, line):
    assert cli_main(["status", given]) == 0
    assert capsys.readouterr().out.splitlines()[0] == line


def test_explain_and_cancel_find_a_short_pbs_id(runs, capsys):
    assert cli_main(["explain", "15[3]"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "job 15[3].pbshost ended FAILED"
    assert cli_main(["cancel", "2"]) == 0  # it has ended: nothing to cancel, its state said
    assert capsys.readouterr().out == "COMPLETED\n"


@pytest.mark.parametrize(
    ("given", "which"),
    [("15[]", ("sub0", "sub3")), ("15[].pbshost", ("sub0", "sub3")),
     ("1234", ("task5", "task6")), ("16", ("turn0", "turn1"))],
)  # fmt: skip
@pytest.mark.parametrize("command", ["status", "explain", "cancel"])
def test_an_id_of_several_runs_lists_them_and_picks_none(
    runs, isolated_runs, capsys, command, given, which
):
    assert cli_main([command, given]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    listed = [f"  {runs[w]}  (job {RunDir(Path(runs[w])).manifest()['job_id']}, "
              f"{RunDir(Path(runs[w])).manifest()['state']})" for w in which]  # fmt: skip
    assert captured.err == (
        f"hpcprof-kit {command}: job id {given!r} matches 2 runs under the runs root "
        f"{isolated_runs}:\n" + "\n".join(listed) + "\npass one of these run directories, or "
        "the job id of one run (an array's subjob as N[i], a Slurm array task as N_i)\n"
    )


def test_a_pbs_array_is_no_job_by_its_plain_number(runs, isolated_runs, capsys):
    """As for qstat, ``15`` is not the array ``15[]``; and ``2`` is not ``21``."""
    assert cli_main(["status", "15"]) == 2
    err = capsys.readouterr().err
    assert f"under the runs root {isolated_runs}, and no run there has job id '15'" in err
