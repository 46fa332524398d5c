"""The pathologies app's patterns across steps and ranks, under real Hydra mpiexec (2 ranks,
gloo, CPU, torch.profiler): a checkpoint saved every third step, a garbage-collector pause on
one rank in one step, and uneven batches whose slow rank rotates. Each is read as a user
reads the trace, from ``step_breakdown``'s parts per rank and step; every check compares
steps or ranks of the same run with each other, never with a clock of the test's own."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from test_pathologies import _run  # the app under mpiexec with the profiler's schedule

from hpcprof_kit import traces
from hpcprof_kit.apps.pathologies import batch_sizes, gc_stall, main
from hpcprof_kit.traces.analyses.breakdown import step_breakdown

RECORDED = list(range(1, 8))  # step 0 is the profiler's warm-up step


def _report(run_dir):
    from hpcprof_kit.traces.reporting.report import report

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return report(run_dir / "traces")


def _named(run_dir, kind: str) -> list[dict]:
    """The report's findings of ``kind`` on the run (the report a user runs on the trace)."""
    rep = _report(run_dir)
    found = [f for f in rep.findings if f["kind"] == kind]
    assert found, (rep.time_lost.text(), sorted({f["kind"] for f in rep.findings}))
    return found


def _parts(run_dir):
    """Per rank and step, in ms: wall, busy (wall less the exposed communication: the time
    the rank did not wait for the others), the exposed communication and idle (no op)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bd = step_breakdown(traces.load(run_dir / "traces"))
    ms = bd.assign(wall=bd["wall_ns"] / 1e6, busy=(bd["wall_ns"] - bd["exposed_comm_ns"]) / 1e6,
                   wait=bd["exposed_comm_ns"] / 1e6, idle=bd["idle_ns"] / 1e6)  # fmt: skip
    assert sorted(ms["rank"].unique()) == [0, 1]
    assert ms.groupby("rank")["step"].apply(list).tolist() == [RECORDED, RECORDED]
    return ms.set_index(["rank", "step"])[["wall", "busy", "wait", "idle"]]


@pytest.mark.mpi
def test_a_checkpoint_every_third_step_makes_those_steps_slow_on_every_rank(mpiexec, tmp_path):
    # 128 MiB of frozen weights in the state dict: each save is 50-400 ms on a loaded CPU
    # host against ~22 ms steps
    run = tmp_path / "run"
    done = _run(mpiexec, run, "--problem", "periodic_save", "--save-mb", "128")
    assert done.returncode == 0, done.stderr
    assert "pathologies: 8 steps with periodic_save" in done.stdout
    ms = _parts(run)
    for rank in (0, 1):
        busy, idle = ms.loc[rank, "busy"], ms.loc[rank, "idle"]
        # the slow steps by the rank's own work (a wait for the other rank's save spills into
        # the next step's all-reduce, and is no work of this rank's): the save steps, 3 and 6
        # (4-8x the median here; a loaded host's worst other step, ~1.8x)
        slow = sorted(busy.index[busy > 3 * busy.median()])
        assert slow == [3, 6], ms
        # most of a save step's extra time is host work no traced op covers: the file write
        extra = busy[[3, 6]] - busy.median()
        assert (idle[[3, 6]] > 0.5 * extra).all(), ms
    # the checkpoints' folders were inside the run directory and are gone
    assert not list(run.glob("pathologies-saves-*"))
    # the report names them: steps 3 and 6, every 3 steps, on both ranks, host time no op
    # covers (the file write), and their cost in the run's time lost
    # (on a loaded host one rank's save can take several times the other's: the rule may then
    # hold one of the two back, but it never names a step that saved nothing)
    (slow,) = _named(run, "slow_steps")
    assert set(slow["steps"]) <= {3, 6} and slow["ranks"] == [0, 1]
    assert slow["evidence"]["period"] in (3, None)
    assert "host time with no traced op" in slow["summary"] and slow["lost_ms"] > 0


STALL_MS = 80.0


@pytest.mark.mpi
def test_a_gc_pause_on_one_rank_is_idle_time_there_and_a_wait_on_the_other(mpiexec, tmp_path):
    # rank 0, step 5: not the defaults (the last rank, step 4), so the flags are followed
    done = _run(mpiexec, tmp_path / "run", "--problem", "host_stall", "--stall-rank", "0",
                "--stall-step", "5", "--stall-ms", f"{STALL_MS:g}")  # fmt: skip
    assert done.returncode == 0, done.stderr
    ms = _parts(tmp_path / "run")
    stalled = ms.loc[(0, 5)]
    # the pause is host time with no op: at least the asked ms (the trace's clock against the
    # app's, to 10 %), and more than any other cell's idle time by far
    assert stalled["idle"] >= 0.9 * STALL_MS, ms
    assert stalled["idle"] > 1.5 * ms["idle"].drop((0, 5)).max(), ms
    # the other rank waits for it in the step's all-reduce
    assert ms.loc[(1, 5), "wait"] >= 0.5 * STALL_MS, ms
    assert ms.loc[(1, 5), "wait"] > stalled["wait"], ms
    # the report names the stall: rank 0, step 5, at least the asked ms lost, never a straggler
    # (a loaded host may pause rank 0 in another step too: that is a stall as well)
    # a host_stall finding per rank that stalled: rank 0's names step 5 (a loaded host may
    # also pause a rank elsewhere, and that is a stall as well)
    stalls = {f["ranks"][0]: f for f in _named(tmp_path / "run", "host_stall")}
    assert 5 in stalls[0]["steps"]
    assert stalls[0]["evidence"]["stall_ms_by_step"][5] >= 0.8 * STALL_MS


@pytest.mark.mpi
def test_uneven_batches_make_a_slow_rank_that_changes_every_step(mpiexec, tmp_path):
    # 60 ms of compute a batch of 16 rows: the 27-row batch computes ~42 ms longer, which a
    # loaded host's step-to-step spread does not hide
    done = _run(mpiexec, tmp_path / "run", "--problem", "rotating_straggler", "--work-ms", "60")
    assert done.returncode == 0, done.stderr
    ms = _parts(tmp_path / "run")
    busy = ms["busy"].unstack("rank")  # steps x ranks
    # the rank with the most work in step s is rank s mod 2: it changes every step (a host
    # loaded by other work once held the small batch's rank back past it in one step of
    # seven; a slow rank that does not rotate matches in about half the steps)
    planted = np.array([s % 2 for s in RECORDED])
    assert (busy.idxmax(axis=1).to_numpy() == planted).sum() >= len(RECORDED) - 1, ms
    # and the other rank waits for it: its exposed communication is the larger
    wait = ms["wait"].unstack("rank")
    assert (wait.idxmax(axis=1).to_numpy() == 1 - planted).sum() >= len(RECORDED) - 1, ms
    # the planted lead: the large batch's rank works ~1.7x as long (1.3x at least in a typical
    # step; a loaded host once held the small batch's rank back to 1.24x in one step)
    ratio = busy.max(axis=1) / busy.min(axis=1)
    assert ratio.median() > 1.3 and (ratio > 1.1).all(), ms
    # the report never calls it one rank's straggler; where it names a rotating slow rank
    # (a loaded host's noise can hide the lead of two ranks: the account still shows each
    # step's slow rank), each step's is the right one
    rep = _report(tmp_path / "run")
    found = {f["kind"]: f for f in rep.findings}
    assert "straggler" not in found, rep.time_lost.text()
    steps = rep.time_lost.steps.set_index("step")
    lost = steps[steps["lost_ms"] > 0]
    # the steps the account finds lost were lost on their large batch's rank, most of them
    assert not len(lost) or (lost["rank"] == lost.index % 2).mean() >= 0.5, rep.time_lost.text()
    if "rotating_straggler" in found:  # each step's slow rank as the run measured it
        by_step = {int(s): r for s, r in found["rotating_straggler"]["evidence"][
            "slow_rank_by_step"].items()}  # fmt: skip
        slowest = busy.idxmax(axis=1)
        assert all(r == slowest[s] for s, r in by_step.items()), (by_step, ms)


def test_the_slow_rank_rotates_its_larger_batch():
    assert [batch_sizes(5, r, 2, 1.7) for r in (0, 1)] == [[27, 16, 27, 16, 27],
                                                           [16, 27, 16, 27, 16]]  # fmt: skip
    assert batch_sizes(4, 2, 3, 2.0) == [16, 16, 32, 16]
    assert batch_sizes(3, 0, 2, None) == [16, 16, 16]


def test_a_gc_pause_collects_garbage_for_the_asked_time():
    import gc

    assert gc_stall(5.0) >= 1
    assert gc.isenabled()  # the automatic collector is back on


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--problem", "periodic_save", "--save-every", "0"],
         "--save-every 0: at least 1; use the default (--save-every 3)"),
        (["--problem", "periodic_save", "--save-mb", "0"],
         "--save-mb 0: at least 1; use the default (--save-mb 64)"),
        (["--problem", "periodic_save", "--steps", "3"],
         "--save-every 3: at most --steps - 1 (2), else no step saves (steps K, 2K, ... from "
         "0); use a smaller --save-every or more --steps"),
        (["--problem", "host_stall", "--stall-ms", "0"],
         "--stall-ms 0: more than 0 ms; use the default (--stall-ms 60)"),
        (["--problem", "host_stall", "--stall-step", "8"],
         "--stall-step 8: one of the steps 0 to 7 (--steps 8); use a step in that range"),
        (["--problem", "rotating_straggler", "--rotate-factor", "1.02"],
         "--rotate-factor 1.02: the slow rank's batch, that many times the others' 16 rows, "
         "must be larger: at least 1.04 (17 rows); use the default (--rotate-factor 1.7)"),
    ],
)  # fmt: skip
def test_a_bad_pattern_flag_is_refused_naming_the_limit_and_the_fix(flags, message, capsys):
    assert main(flags) == 2
    assert f"error: {message}" in capsys.readouterr().err


def test_a_stall_rank_outside_the_run_is_refused_with_its_ranks(capsys):
    # a world of one rank, started in this process
    assert main(["--problem", "host_stall", "--stall-rank", "3", "--device", "cpu",
                 "--steps", "1", "--stall-step", "0"]) == 2  # fmt: skip
    assert ("error: --stall-rank 3: this run has ranks 0 to 0; use one of them (default: the "
            "last)") in capsys.readouterr().err  # fmt: skip
