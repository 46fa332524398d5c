"""The kit against HolisticTraceAnalysis 0.5.0 on the shared CUDA traces (issue #15 item 6).

HTA runs in its own ``.venv-hta`` (it needs pandas<3; ``benchmarks/hta_env.py``
builds it on first use, about two minutes, and later runs reuse it) and writes its temporal
breakdown and comm/compute overlap as JSON. The kit computes the same figures from its own
trace table under HTA's definitions (``hpcprof_kit.traces.analyses.hta_compat``). The figures must be
equal: to the µs for times, with HTA's own rounding of sub-µs timestamps reproduced, and to
HTA's two decimals for percentages. ``docs/hta-crosscheck.md`` shows them side by side.

Select with ``-k hta``; the HTA half needs ../shared/traces and a buildable .venv-hta
(skipped without them on a laptop, a failure in CI).
"""

from __future__ import annotations

import importlib.util
import json
import math
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from hpcprof_kit import traces
from hpcprof_kit.errors import TraceFormatError
from hpcprof_kit.traces.analyses import hta_compat

from must_have import missing

REPO = Path(__file__).resolve().parents[1]
# one HTA run per trace directory: the files of one job, one file per rank
HTA_JOBS = {
    "cuda_1rank": ["cuda_1rank_ns_resolution.json.gz"],
    "cuda_2_of_128": ["cuda_rank0_of_128.json.gz", "cuda_rank1_of_128.json.gz"],
}
SYNTHETIC = "two_steps"  # written by the test: exercises HTA's last-step window
ALL_JOBS = sorted([*HTA_JOBS, SYNTHETIC])
TIMES = ["idle_time(us)", "compute_time(us)", "non_compute_time(us)", "kernel_time(us)"]
SHARES = ["idle_time_pctg", "compute_time_pctg", "non_compute_time_pctg"]
# HTA prints shares rounded to 2 decimals; the kit rounds the same ratio the same way, but a
# share whose third decimal is a 5 may round either way in float: one step of the last digit
PCTG_STEP = 0.01


def _hta_env():
    spec = importlib.util.spec_from_file_location("hta_env", REPO / "benchmarks" / "hta_env.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _load(paths: list[Path]):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return traces.load([str(p) for p in paths])


@pytest.fixture(scope="module")
def hta_figures(shared_traces: Path, tmp_path_factory) -> dict[str, dict]:
    """HTA's own figures per job, computed in .venv-hta (all jobs at once)."""
    env = _hta_env()
    python = env.ensure_hta(quiet=True)
    if python is None:
        missing(f"could not build {env.HTA_VENV} with {' '.join(env.REQUIREMENTS)} (pip)")
    dirs = {}
    for job, files in HTA_JOBS.items():
        dirs[job] = tmp_path_factory.mktemp(job)
        for name in files:  # HTA reads every trace file of a directory
            (dirs[job] / name).symlink_to(shared_traces / "hta" / name)
    dirs[SYNTHETIC] = _write_two_steps(tmp_path_factory.mktemp(SYNTHETIC))
    with ThreadPoolExecutor(len(dirs)) as pool:
        running = {job: pool.submit(env.hta_figures, python, d) for job, d in dirs.items()}
        figures = {job: f.result() for job, f in running.items()}
    out = tmp_path_factory.getbasetemp() / "hta_figures.json"
    out.write_text(json.dumps(figures, indent=1))  # HTA's numbers, for a failing run's reader
    return figures


@pytest.fixture(scope="module")
def kit_tables(shared_traces: Path, tmp_path_factory) -> dict:
    tables = {
        job: _load([shared_traces / "hta" / name for name in files])
        for job, files in HTA_JOBS.items()
    }
    tables[SYNTHETIC] = _load([_write_two_steps(tmp_path_factory.mktemp(SYNTHETIC))])
    return tables


def _write_two_steps(folder: Path) -> Path:
    (folder / "two_steps.json").write_text(json.dumps(_kineto(two_step_events())))
    return folder


def _by_rank(rows: list[dict]) -> dict[int, dict]:
    return {int(row["rank"]): row for row in rows}


@pytest.mark.shared_traces
@pytest.mark.parametrize("job", ALL_JOBS)
def test_hta_temporal_breakdown_equals_kit(hta_figures, kit_tables, job):
    hta = _by_rank(hta_figures[job]["temporal_breakdown"])
    kit = _by_rank(
        hta_compat.temporal_breakdown(kit_tables[job], microseconds=True).to_dict("records")
    )
    assert sorted(kit) == sorted(hta)
    for rank, theirs in hta.items():
        ours = kit[rank]
        assert {c: ours[c] for c in TIMES} == {c: theirs[c] for c in TIMES}, f"rank {rank}"
        for col in SHARES:
            assert ours[col] == pytest.approx(theirs[col], abs=PCTG_STEP), (rank, col)


@pytest.mark.shared_traces
@pytest.mark.parametrize("job", ALL_JOBS)
def test_hta_comm_comp_overlap_equals_kit(hta_figures, kit_tables, job):
    hta = _by_rank(hta_figures[job]["comm_comp_overlap"])
    kit = _by_rank(
        hta_compat.comm_comp_overlap(kit_tables[job], microseconds=True).to_dict("records")
    )
    assert sorted(kit) == sorted(hta)
    for rank, theirs in hta.items():
        pctg, ratio = theirs["comp_comm_overlap_pctg"], kit[rank]["comp_comm_overlap_ratio"]
        if pctg is None:  # HTA: 0/0 for a rank without NCCL kernels
            assert math.isnan(ratio), f"rank {rank}"
            continue
        # the kit's unrounded ratio lies in the bucket HTA's two decimals stand for
        assert abs(100 * ratio - pctg) <= 0.005 + 1e-9, f"rank {rank}: {100 * ratio} vs {pctg}"


@pytest.mark.shared_traces
def test_hta_equals_kit_step_breakdown_where_the_windows_agree(hta_figures, kit_tables):
    """The kit's own ``step_breakdown``/``comm_overlap``, on the steps HTA keeps (all but the
    last), give HTA's numbers on the 128-rank job: there every kernel of step 551 runs inside
    its ProfilerStep span, so the two windows hold the same kernels and differ only in
    length (HTA's stops at the last kernel, the step at the step's end)."""
    df = kit_tables["cuda_2_of_128"]
    bd = traces.step_breakdown(df)
    kept = bd[bd["step"] < bd.groupby("rank")["step"].transform("max")]
    parts = kept.groupby("rank")[[c for c in kept.columns if c.endswith("_ns")]].sum() / 1000
    hta = _by_rank(hta_figures["cuda_2_of_128"]["temporal_breakdown"])
    overlap = _by_rank(hta_figures["cuda_2_of_128"]["comm_comp_overlap"])
    ours = traces.comm_overlap(kept).set_index("rank")
    for rank, theirs in hta.items():
        p = parts.loc[rank]
        assert p["compute_ns"] + p["hidden_comm_ns"] == theirs["compute_time(us)"]
        assert p["exposed_comm_ns"] + p["memory_ns"] == theirs["non_compute_time(us)"]
        busy = theirs["kernel_time(us)"] - theirs["idle_time(us)"]
        assert p["wall_ns"] - p["host_ns"] - p["idle_ns"] == busy
        pctg = overlap[rank]["comp_comm_overlap_pctg"]
        assert abs(100 * ours.loc[rank, "overlap_ratio"] - pctg) <= 0.005 + 1e-9


@pytest.mark.shared_traces
@pytest.mark.parametrize("job", ALL_JOBS)
def test_hta_rounding_is_the_only_difference_at_ns(kit_tables, job):
    """Without HTA's rounding the figures move by at most what rounding can move them:
    nothing on whole-µs traces, under 2.25 µs per device event on ns traces."""
    df = kit_tables[job]
    exact = hta_compat.temporal_breakdown(df).set_index("rank")
    rounded = hta_compat.temporal_breakdown(df, microseconds=True).set_index("rank")
    sub_us = (df["ts_ns"] % 1000 != 0).groupby(df["rank"]).any()
    events = (df["stream"] != -1).groupby(df["rank"]).sum()
    for rank in exact.index:
        gap = (exact.loc[rank, TIMES] - rounded.loc[rank, TIMES]).abs()
        if not sub_us[rank]:
            assert gap.max() == 0, f"rank {rank}: whole-µs trace, {gap.to_dict()}"
            continue
        assert gap["kernel_time(us)"] < 2.25, f"rank {rank}"  # its first and last event only
        assert gap.max() < 2.25 * events[rank], f"rank {rank}"


def _kineto(events: list[dict]) -> dict:
    return {"traceEvents": events, "distributedInfo": {"rank": 0, "world_size": 1}}


def _x(cat, name, ts, dur, **args) -> dict:
    tid = 7 if "stream" in args else 1
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 0,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def two_step_events() -> list[dict]:
    """A two-step trace whose figures are worked by hand (see the test that uses it)."""
    launch = "cudaLaunchKernel"
    return [
        _x("user_annotation", "ProfilerStep#1", 0, 100),
        _x("user_annotation", "ProfilerStep#2", 100, 100),
        _x("cuda_runtime", launch, 10, 5, correlation=1),
        _x("kernel", "sm80_gemm", 20, 30, device=0, stream=7, correlation=1),
        _x("cuda_runtime", launch, 15, 1, correlation=2),
        _x("kernel", "ncclKernel_AllReduce", 40, 40, device=0, stream=20, correlation=2),
        _x("cuda_runtime", "cudaMemcpyAsync", 16, 1, correlation=3),
        _x(
            "gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", 90, 5, device=0, stream=7, correlation=3
        ),
        _x("cuda_runtime", launch, 110, 5, correlation=4),  # in the last step: dropped
        _x("kernel", "relu_kernel", 120, 10, device=0, stream=7, correlation=4),
    ]


def test_hta_window_drops_the_last_step_and_its_launches(tmp_path):
    """HTA's window on a two-step trace: the last step's launches do not count (HTA itself
    gives the same figures: the ``two_steps`` job of the tests above)."""
    df = _load([_write_two_steps(tmp_path)])
    bd = hta_compat.temporal_breakdown(df).iloc[0]
    # window [20, 95) µs; busy [20, 80) + [90, 95); compute = the gemm
    assert bd[TIMES].tolist() == [10.0, 30.0, 35.0, 75.0]
    ov = hta_compat.comm_comp_overlap(df).iloc[0]
    # NCCL [40, 80) beside the gemm [20, 50): 10 of 40 µs
    assert (ov["comm_time(us)"], ov["overlap_time(us)"]) == (40.0, 10.0)
    assert ov["comp_comm_overlap_pctg"] == 25.0


def test_hta_rank_without_gpu_events_is_an_error(tmp_path):
    path = tmp_path / "cpu_only.json"
    path.write_text(json.dumps(_kineto([_x("cpu_op", "aten::mm", 0, 10)])))
    with pytest.raises(TraceFormatError, match="no GPU events"):
        hta_compat.temporal_breakdown(_load([path]))


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)", "COMMUNICATION"),
        ("ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWorkElem)", "COMMUNICATION"),
        ("Memcpy DtoH (Device -> Pinned)", "MEMORY"),
        ("Memset (Device)", "MEMORY"),
        ("dma_transfer", "MEMORY"),
        ("void at::native::vectorized_elementwise_kernel<4>", "COMPUTATION"),
        ("ncclCommInit", "COMPUTATION"),  # HTA: nccl without "Kernel" is no communication
        ("cudaStreamSync", "OTHER"),
        ("fused_Memcpy_kernel", "OTHER"),  # HTA's compute test rejects ".*Memcpy"
    ],
)
def test_hta_kernel_classes(name, kind):
    assert hta_compat.kernel_class(name) == kind
