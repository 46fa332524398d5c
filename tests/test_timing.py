"""Timing JSON of the apps -> tidy table, summaries, compute vs comm; one real seqpar run."""

from __future__ import annotations

import json
import sys

import matplotlib

matplotlib.use("Agg")

import pytest

from hpcprof_kit import timing
from hpcprof_kit.errors import SpecError, TraceFormatError

from launch import run_ok


def write_run(root, name, world, dtype, per_rank, nodes=1):
    """A run directory whose timings/ holds one JSON per rank, in the documented layout."""
    folder = root / name / "timings"
    folder.mkdir(parents=True)
    for rank in range(world):
        record = {
            "app": "seqpar", "rank": rank, "world_size": world, "local_rank": rank, "nodes": nodes,
            "host": "h", "device": "cpu", "backend": "gloo", "dtype": dtype,
            "params": {"seq_len": 64, "hidden": 16, "steps": 2},
            "timings": per_rank(rank),
        }  # fmt: skip
        (folder / f"seqpar-{rank}-of-{world}.json").write_text(json.dumps(record))
    return root / name


def two_rank(rank):
    return {
        "all_gather": [0.001, 0.003],
        "matmul_1": [0.002, 0.002],
        "reduce_scatter": [0.001 * (rank + 1)] * 2,
        "step": [0.005, 0.007 + 0.001 * rank],
    }


def one_rank(rank):
    return {"matmul_1": [0.004, 0.006], "step": [0.004, 0.006]}


def test_load_timings_gives_one_row_per_rank_op_iteration(tmp_path):
    run = write_run(tmp_path, "seqpar_local_N1_R2_20260101-120000", 2, "float32", two_rank)
    t = timing.load_timings(run)
    assert len(t) == 2 * 4 * 2
    assert t["run"].unique().tolist() == ["seqpar_local_N1_R2_20260101-120000"]
    row = t[(t["rank"] == 1) & (t["op"] == "step") & (t["iteration"] == 1)].iloc[0]
    assert row["seconds"] == pytest.approx(0.008)
    assert dict(zip(t["op"].astype(str), t["kind"].astype(str), strict=True)) == {
        "all_gather": "comm", "matmul_1": "compute", "reduce_scatter": "comm", "step": "total",
    }  # fmt: skip


def test_summary_and_compute_vs_comm_numbers(tmp_path):
    write_run(tmp_path, "a_R2", 2, "float32", two_rank)
    write_run(tmp_path, "b_R1", 1, "bfloat16", one_rank)
    t = timing.load_timings(str(tmp_path / "*"))
    s = timing.timing_summary(t).set_index(["dtype", "world_size", "op"])
    assert s.loc[("float32", 2, "reduce_scatter"), "mean_ms"] == pytest.approx(1.5)
    assert s.loc[("float32", 2, "step"), "max_ms"] == pytest.approx(8.0)
    assert s.loc[("bfloat16", 1, "matmul_1"), "samples"] == 2
    cvc = timing.compute_vs_comm(t).set_index("dtype")
    # rank 0: comm 2 and 4 ms, compute 2 and 2; rank 1: comm 3 and 5 ms -> mean comm 3.5 ms
    assert cvc.loc["float32", "comm_ms"] == pytest.approx(3.5)
    assert cvc.loc["float32", "compute_ms"] == pytest.approx(2.0)
    assert cvc.loc["float32", "step_ms"] == pytest.approx(6.25)
    assert cvc.loc["float32", "other_ms"] == pytest.approx(0.75)
    assert cvc.loc["bfloat16", ["compute_ms", "comm_ms", "comm_share"]].tolist() == [5.0, 0.0, 0.0]
    plot = timing.plot_compute_vs_comm(t)
    assert [tk.get_text() for tk in plot.fig.axes[0].get_xticklabels()] == [
        "bfloat16\n1 rank, 1 node", "float32\n2 ranks, 1 node",
    ]  # fmt: skip
    assert sum(p.get_height() for p in plot.fig.axes[0].patches) == pytest.approx(6.25 + 5.0)


def test_bad_timing_inputs_raise_kit_errors(tmp_path):
    with pytest.raises(SpecError, match="matches no file"):
        timing.load_timings(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(SpecError, match="hold no timing JSON"):
        timing.load_timings(tmp_path / "empty")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"app": "seqpar", "rank": 0}))
    with pytest.raises(
        TraceFormatError, match=r"bad.json lacks field\(s\) \['world_size', 'dtype', 'timings'\]"
    ):
        timing.load_timings(bad)
    with pytest.raises(SpecError, match="load_timings"):
        timing.compute_vs_comm(bad)


@pytest.mark.mpi
def test_real_seqpar_run_two_ranks(tmp_path, mpiexec):
    out = tmp_path / "seqpar_local_N1_R2" / "timings"
    cmd = [mpiexec, "-n", "2", sys.executable, "-m", "hpcprof_kit.apps.seqpar", "--seq-len", "128",
           "--hidden", "64", "--steps", "3", "--timings-dir", str(out)]  # fmt: skip
    run_ok(cmd, timeout=120)
    t = timing.load_timings(out.parent)
    assert sorted(t["rank"].unique().tolist()) == [0, 1]
    assert set(t["op"].astype(str)) == {
        "all_gather",
        "matmul_1",
        "matmul_2",
        "reduce_scatter",
        "step",
    }
    assert (t.groupby(["rank", "op"], observed=True).size() == 3).all()
    cvc = timing.compute_vs_comm(t).iloc[0]
    assert cvc["world_size"] == 2 and cvc["comm_ms"] > 0 and cvc["compute_ms"] > 0
    assert cvc["compute_ms"] + cvc["comm_ms"] <= cvc["step_ms"] * 1.001


def test_nb08_exercise_checker(tmp_path, capsys):
    from hpcprof_kit.exercises import nb08

    write_run(tmp_path, "a_R2", 2, "float32", two_rank)
    t = timing.load_timings(tmp_path / "a_R2")
    assert nb08.check_comm_share(t, 3.5 / 6.25) is True  # comm 3.5 ms of a 6.25 ms step
    assert "Correct - 56%" in capsys.readouterr().out
    assert nb08.check_comm_share(t, 56) is False  # a percentage, not a fraction
    assert "a fraction, not %" in capsys.readouterr().out
    with pytest.raises(SpecError, match="world_size=4 was not run"):
        nb08.check_comm_share(t, 0.5, world_size=4)
