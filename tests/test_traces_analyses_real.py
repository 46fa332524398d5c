"""Analyses on real traces: the third-party GPU traces in ../shared/traces and our own CPU run."""

from __future__ import annotations

import warnings

import pytest

from hpcprof_kit import traces
from hpcprof_kit import traces as A

PART_COLS = [f"{p}_ns" for p in A.PARTS]
SHARED = {  # file -> (kind of breakdown, ProfilerStep numbers in the trace)
    "cuda_1rank_ns_resolution.json.gz": ("device", None),
    "cuda_rank0_of_128.json.gz": ("device", [551, 552]),
    "cuda_rank1_of_128.json.gz": ("device", [551, 552]),
    "rocm_mi250_1rank.json.gz": ("device", [1, 2]),
    "cpu_rank34_of_300.json.gz": ("cpu", [551]),
    "cpu_no_distributed_info.json.gz": ("cpu", [1009]),
}


def _load(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "no rank in ..." for the files that carry none
        return traces.load(path)


def assert_parts_add_up(bd):
    assert len(bd) > 0, "a breakdown must never be silently empty"
    assert (bd[PART_COLS] >= 0).all().all()
    gap = (bd[PART_COLS].sum(axis=1) - bd["wall_ns"]).abs()
    assert gap.max() <= 1_000, f"parts miss the wall time by {gap.max()} ns"


@pytest.mark.shared_traces
@pytest.mark.parametrize("name", sorted(SHARED))
def test_shared_trace_breakdown_adds_up(shared_traces, name):
    df = _load(shared_traces / "hta" / name)
    kind, steps = SHARED[name]
    bd = A.step_breakdown(df)
    assert_parts_add_up(bd)
    assert set(bd["kind"]) == {kind}
    if steps is not None:
        assert bd["step"].tolist() == steps
    host = df[df["track"] == "cpu"]
    n_step_events = host["name"].astype(str).str.startswith("ProfilerStep#").sum()
    assert len(bd) == max(n_step_events, 1)
    if kind == "device":
        assert bd["compute_ns"].sum() > 0
        assert len(A.top_kernels(df, n=5)) > 0
    assert len(A.top_ops(df, n=5)) > 0 or kind == "cpu"


@pytest.mark.shared_traces
def test_shared_128_rank_job_ranks_side_by_side(shared_traces):
    df = _load(str(shared_traces / "hta" / "cuda_rank*_of_128.json.gz"))
    rs = A.rank_steps(df)
    assert rs.index.tolist() == [551, 552] and [c for c in rs.columns if isinstance(c, int)] == [
        0,
        1,
    ]
    assert (rs["spread_ms"] >= 0).all() and set(rs["straggler"]) <= {-1, 0, 1}
    # a step either names one straggler or the ranks that tie for it, never both
    assert ((rs["straggler"] >= 0) == (rs["tied"] == "")).all()
    assert set(rs.loc[rs["straggler"] < 0, "tied"]) <= {"0,1"}
    ov = A.comm_overlap(df).set_index("rank")
    # NCCL kernels run on their own stream beside compute kernels: some of it hides, not all
    assert (ov["comm_ns"] > 0).all()
    assert ((ov["overlap_ratio"] > 0) & (ov["overlap_ratio"] < 1)).all()
    assert (ov["hidden_ns"] + ov["exposed_ns"] == ov["comm_ns"]).all()
    # the breakdown's parts, summed per rank, are the overlap's numbers (CUDA/NCCL trace)
    bd = A.step_breakdown(df).groupby("rank")
    assert ov["exposed_ns"].tolist() == bd["exposed_comm_ns"].sum().tolist()
    assert ov["hidden_ns"].tolist() == bd["hidden_comm_ns"].sum().tolist()
    kernels = A.top_kernels(df, n=50)
    assert any(k.startswith("ncclKernel_") for k in kernels.index)
    assert kernels["self_ms"].sum() <= kernels["total_ms"].sum() + 1e-9


@pytest.fixture(scope="module")
def cpu_run(train_run):
    """The shared real 2-rank gloo DDP training run (tests/train_run.py): its first profiler
    cycle, wait=1, warmup=1, active=2, so steps 2 and 3."""
    assert train_run.returncode == 0, train_run.stderr
    folder = train_run.run_dir / "traces"
    return traces.load([folder / "trace-0-of-2.json", folder / "trace-1-of-2.json"], cache=False)


@pytest.mark.mpi
def test_own_cpu_traces_breakdown_overlap_and_ranks(cpu_run):
    bd = A.step_breakdown(cpu_run)
    assert_parts_add_up(bd)
    assert bd[["rank", "step"]].values.tolist() == [[0, 2], [0, 3], [1, 2], [1, 3]]
    assert set(bd["kind"]) == {"cpu"}
    comm = bd["hidden_comm_ns"] + bd["exposed_comm_ns"]
    assert (comm > 0).all(), "every DDP step all-reduces gradients through gloo"
    assert (bd["compute_ns"] > 0).all()  # (how much depends on load: a slow peer means waiting)
    assert (bd[["memory_ns", "host_ns"]] == 0).all().all()
    ov = A.comm_overlap(cpu_run)
    assert ov["rank"].tolist() == [0, 1] and (ov["comm_ns"] > 0).all()
    assert ov["exposed_ns"].tolist() == bd.groupby("rank")["exposed_comm_ns"].sum().tolist()
    # gloo's all-reduce (a range on the comm track) is communication: each one, clipped to its
    # step, fits inside the rank's comm time
    spans = A.step_spans(cpu_run).set_index(["rank", "step"])
    gloo = cpu_run[(cpu_run["name"] == "gloo:all_reduce") & (cpu_run["step"] >= 0)]
    win = spans.loc[list(zip(gloo["rank"], gloo["step"], strict=True))]
    start = gloo["ts_ns"].to_numpy().clip(win["start_ns"].to_numpy(), win["end_ns"].to_numpy())
    end = (gloo["ts_ns"] + gloo["dur_ns"]).to_numpy().clip(start, win["end_ns"].to_numpy())
    inside = gloo.assign(inside=end - start).groupby("rank")["inside"].max()
    assert (ov.set_index("rank")["comm_ns"] >= inside).all(), "gloo's own ranges are comm"
    assert (inside > 0).all()
    assert ov["overlap_ratio"].between(0, 1).all()
    rs = A.rank_steps(cpu_run)
    assert rs.index.tolist() == [2, 3]
    mm = A.same_name(cpu_run, "aten::mm")
    assert mm.loc["0", "count"] == mm.loc["1", "count"] > 0  # DDP ranks run the same model
    assert mm.loc["all", "count"] == 2 * mm.loc["0", "count"]
    top = A.top_ops(cpu_run, n=10)
    assert (top["self_ms"] <= top["total_ms"] + 1e-9).all() and len(top) == 10
    diff = A.compare_runs(
        cpu_run[cpu_run["rank"] == 0], cpu_run[cpu_run["rank"] == 1], ("r0", "r1")
    )
    assert diff.loc["aten::mm", "count_r0"] == diff.loc["aten::mm", "count_r1"]
    assert diff.attrs["steps"].index.tolist() == [2, 3, "mean"]
