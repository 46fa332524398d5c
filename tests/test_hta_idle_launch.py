"""The device's idle time split and the kernel launch stats, against HTA 0.5.0 (issue #23).

``hpcprof_kit.traces.analyses.device_idle`` computes HTA's ``get_idle_time_breakdown`` and
``get_cuda_kernel_launch_stats`` from the kit's trace table. HTA computes its own in
``.venv-hta`` (``benchmarks/hta_env.py``; the HTA runs of ``tests/test_hta_crosscheck.py``,
whose fixture this file reuses). On the shared CUDA traces the figures must be equal: every
idle time per rank, stream and category to HTA's µs, every launch's cpu duration, gpu
duration and launch delay to HTA's µs, with HTA's rounding of sub-µs timestamps
reproduced (``microseconds=True``). Without that rounding the kit's exact figures move by
no more than the rounding can move them (a test below bounds it); ``docs/hta-crosscheck.md``
shows both side by side.

Small synthetic traces, worked by hand, pin each rule: a host wait, a kernel wait and an
"other" gap, the launch delay clipped at 0, HTA's cut-offs, the last-step window, HIP and
XPU launch names (which HTA does not pair). The real XPU sample checks the XPU pairing.

The HTA half needs ../shared/traces and a buildable .venv-hta (skipped without them on a
laptop, a failure in CI).
"""

from __future__ import annotations

import json
import math
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_hta_crosscheck import (  # the HTA runs and tables of the cross-check, reused
    ALL_JOBS,
    _hta_env,
    _kineto,
    _load,
    _x,
    hta_figures,  # noqa: F401 (fixture)
    kit_tables,  # noqa: F401 (fixture)
)

from hpcprof_kit import traces
from hpcprof_kit.errors import TraceFormatError
from hpcprof_kit.traces.analyses import device_idle
from hpcprof_kit.traces.analyses.device_idle import idle_split, launch_stats, launch_summary

from must_have import missing

REPO = Path(__file__).resolve().parents[1]
US = 1000  # ns
WAITS = ("host_wait", "kernel_wait", "other")
XPU_SAMPLE = ("xpu", "atpesc_xpu_eager_sample.json")
ROCM = ("hta", "rocm_mi250_1rank.json.gz")


def _hta_rows(figures: dict, key: str) -> list[dict]:
    rows = figures[key]
    assert not (isinstance(rows, dict) and "error" in rows), f"HTA failed: {rows}"
    return rows


# --- against HTA on the shared CUDA traces (and the cross-check's two-step trace) ---------


def assert_idle_equal(hta: list[dict], kit) -> None:
    """Every (rank, stream, category) HTA reports has the kit's time to the µs; a category
    HTA leaves out of a stream (it never happened there) is 0 in the kit; the streams are
    the same. Shares: HTA's two decimals, NaN on a stream that never waits (one event)."""
    per_stream = kit[kit["stream"] >= 0].set_index(["rank", "stream"])
    assert sorted({(r["rank"], r["stream"]) for r in hta}) == sorted(per_stream.index)
    reported = set()
    for row in hta:
        key, cat = (row["rank"], row["stream"]), row["idle_category"]
        ours = per_stream.loc[key]
        assert ours[f"{cat}_ns"] == row["idle_time"] * US, (key, cat)
        share = ours[f"{cat}_share"]
        if row["idle_time_ratio"] is None:
            assert math.isnan(share), (key, cat)
        else:
            assert share == pytest.approx(row["idle_time_ratio"], abs=0.005 + 1e-9)
        reported.add((*key, cat))
    for key, ours in per_stream.iterrows():
        for cat in WAITS:
            if (*key, cat) not in reported:
                assert ours[f"{cat}_ns"] == 0, (key, cat)


def assert_launches_equal(hta: list[dict], kit) -> None:
    """The same launches (correlation ids) per rank, among those HTA pairs (``hta``), and per
    launch the same cpu duration, gpu duration and launch delay to the µs."""
    kit = kit[kit["hta"]]
    assert {r["rank"] for r in hta} == set(kit["rank"])
    for rank in sorted(kit["rank"].unique()):
        theirs = sorted((r for r in hta if r["rank"] == rank), key=lambda r: r["correlation"])
        ours = kit[kit["rank"] == rank].sort_values("corr")
        assert ours["corr"].tolist() == [r["correlation"] for r in theirs], f"rank {rank}"
        for col in ("cpu_duration", "gpu_duration", "launch_delay"):
            expected = [r[col] * US for r in theirs]
            assert ours[f"{col}_ns"].tolist() == expected, (rank, col)


@pytest.mark.shared_traces
@pytest.mark.parametrize("job", ALL_JOBS)
def test_hta_idle_time_breakdown_equals_kit(hta_figures, kit_tables, job):  # noqa: F811
    hta = _hta_rows(hta_figures[job], "idle_time_breakdown")
    assert_idle_equal(hta, idle_split(kit_tables[job], microseconds=True))


@pytest.mark.shared_traces
@pytest.mark.parametrize("job", ALL_JOBS)
def test_hta_kernel_launch_stats_equal_kit(hta_figures, kit_tables, job):  # noqa: F811
    """These traces launch with CUDA names only, so the kit pairs nothing HTA does not."""
    hta = _hta_rows(hta_figures[job], "cuda_kernel_launch_stats")
    kit = launch_stats(kit_tables[job], microseconds=True)
    assert kit["hta"].all()
    assert_launches_equal(hta, kit)


@pytest.mark.shared_traces
@pytest.mark.parametrize("job", ALL_JOBS)
def test_hta_rounding_is_the_only_difference_at_ns(kit_tables, job):  # noqa: F811
    """Exact ns against HTA's rounding (start up, end down to a whole µs, float64): the same
    streams, events and launches; each gap and each launch figure moves by under 2.25 µs
    (0.25 µs is float64's step at epoch-sized µs); nothing moves on whole-µs traces."""
    df = kit_tables[job]
    exact, rounded = idle_split(df), idle_split(df, microseconds=True)
    assert exact[["rank", "stream", "events"]].equals(rounded[["rank", "stream", "events"]])
    sub_us = bool((df["ts_ns"] % US != 0).any())
    gaps = (exact["events"] - 1).clip(lower=0)
    moved = (exact["idle_ns"] - rounded["idle_ns"]).abs()
    streams = exact["stream"] >= 0
    if not sub_us:
        assert exact.equals(rounded)
    assert (moved[streams] <= 2250 * gaps[streams]).all()
    le, lr = launch_stats(df), launch_stats(df, microseconds=True)
    assert le["corr"].tolist() == lr["corr"].tolist()
    for col in ("cpu_duration_ns", "gpu_duration_ns", "launch_delay_ns"):
        shift = (le[col] - lr[col]).abs()
        assert shift.max() < (2250 if sub_us else 1), col


@pytest.mark.shared_traces
def test_ns_trace_rounding_turns_busy_into_idle(kit_tables):  # noqa: F811
    """The figures of docs/hta-crosscheck.md for the ns trace: HTA's rounding shrinks each
    of the 4,876 events, so 3.66 ms of busy time become gaps, and 500 µs of them host wait."""
    df = kit_tables["cuda_1rank"]
    exact = idle_split(df).iloc[0]
    rounded = idle_split(df, microseconds=True).iloc[0]
    assert exact["events"] == rounded["events"] == 4876
    assert rounded[["idle_ns", "host_wait_ns", "kernel_wait_ns", "other_ns"]].tolist() == [
        10_113_000,
        1_709_000,
        8_404_000,
        0,
    ]
    assert exact[["idle_ns", "host_wait_ns", "kernel_wait_ns", "other_ns"]].tolist() == [
        6_452_701,
        1_208_633,
        5_244_068,
        0,
    ]


# --- the kit's own H100 traces (tests/fixtures/traces/cuda_h100) --------------------------

H100 = REPO / "tests" / "fixtures" / "traces" / "cuda_h100"
H100_RUNS = ("eager", "compiled")


@pytest.fixture(scope="module")
def hta_h100(tmp_path_factory) -> dict[str, dict]:
    env = _hta_env()
    python = env.ensure_hta(quiet=True)
    if python is None:
        missing(f"could not build {env.HTA_VENV} with {' '.join(env.REQUIREMENTS)} (pip)")
    dirs = {}
    for run in H100_RUNS:
        dirs[run] = tmp_path_factory.mktemp(f"hta_h100_{run}")
        (dirs[run] / f"{run}-0-of-1.json.gz").symlink_to(H100 / f"{run}-0-of-1.json.gz")
    with ThreadPoolExecutor(len(dirs)) as pool:
        running = {run: pool.submit(env.hta_figures, python, d) for run, d in dirs.items()}
        return {run: f.result() for run, f in running.items()}


@pytest.mark.parametrize("run", H100_RUNS)
def test_hta_equals_kit_on_h100_traces_in_their_own_time_base(hta_h100, run):
    """The kit's own H100 runs (torch 2.x: ``ts`` counted from ``baseTimeNanoseconds``,
    in ns). HTA rounds the file's own µs; the kit keeps absolute ns, and at absolute µs a
    float64 resolves only 0.25 µs, so ``microseconds=True`` rounds some events 1 µs away
    from HTA. Shifted back to the file's time base, every idle time and every launch HTA
    pairs is HTA's to the µs. (The cuLaunchKernel launches of Triton kernels are the kit's
    only: ``hta`` is False.)"""
    import gzip

    path = H100 / f"{run}-0-of-1.json.gz"
    with gzip.open(path) as f:
        base = json.load(f)["baseTimeNanoseconds"]
    df = _load([path])
    own = df.assign(ts_ns=df["ts_ns"] - base)
    hta_idle = _hta_rows(hta_h100[run], "idle_time_breakdown")
    assert_idle_equal(hta_idle, idle_split(own, microseconds=True))
    stats = launch_stats(own, microseconds=True)
    assert_launches_equal(_hta_rows(hta_h100[run], "cuda_kernel_launch_stats"), stats)
    assert set(stats.loc[~stats["hta"], "launch"]) == {"cuLaunchKernel"}
    absolute = idle_split(df, microseconds=True).set_index("stream")
    host_wait = next(r["idle_time"] for r in hta_idle if r["idle_category"] == "host_wait")
    assert absolute.loc[7, "host_wait_ns"] != host_wait * US  # the time base matters


# --- synthetic traces, worked by hand -------------------------------------------------------

L, C, MC = "cudaLaunchKernel", "cuda_runtime", "cudaMemcpyAsync"


def waits_events() -> list[dict]:
    """Two steps, two streams; every figure below is worked by hand (times in µs).

    stream 7:  gemm [20, 50)   launched [10, 15)   first on the stream
               relu [60, 70)   launched [16, 20)   gap 10, asked before the gemm ended: kernel wait
               add [115, 125)  launched [100, 110) gap 45, asked after relu ended: host wait
               wait [165, 175) launched [21, 25)   gap 40 >= 30, asked long before: other
    stream 20: copy [80, 85)   launched [30, 90)   first; the call ends after the copy starts
               tiny [150, 151) launched [130, 132) gap 65, asked after the copy ended: host wait
    step 2:    late [220, 230) launched [210, 215) in the last step: out of HTA's window
    """
    return [
        _x("user_annotation", "ProfilerStep#1", 0, 200),
        _x("user_annotation", "ProfilerStep#2", 200, 100),
        _x(C, L, 10, 5, correlation=1),
        _x("kernel", "gemm", 20, 30, device=0, stream=7, correlation=1),
        _x(C, L, 16, 4, correlation=2),
        _x("kernel", "relu", 60, 10, device=0, stream=7, correlation=2),
        _x(C, L, 100, 10, correlation=3),
        _x("kernel", "add", 115, 10, device=0, stream=7, correlation=3),
        _x(C, L, 21, 4, correlation=4),
        _x("kernel", "wait", 165, 10, device=0, stream=7, correlation=4),
        _x(C, MC, 30, 60, correlation=5),
        _x(
            "gpu_memcpy",
            "Memcpy HtoD (Pinned -> Device)",
            80,
            5,
            device=0,
            stream=20,
            correlation=5,
        ),
        _x(C, L, 130, 2, correlation=6),
        _x("kernel", "tiny", 150, 1, device=0, stream=20, correlation=6),
        _x(C, L, 210, 5, correlation=7),
        _x("kernel", "late", 220, 10, device=0, stream=7, correlation=7),
    ]


def xpu_events() -> list[dict]:
    """One XPU step: a copy launched with urEnqueueUSMMemcpy and two kernels launched with
    urEnqueueKernelLaunch, on sycl queue 3 (µs): copy [5, 7) asked at [0, 4); k1 [10, 14)
    asked at [5, 6), gap 3, asked before the copy ended (kernel wait); k2 [60, 62) asked at
    [50, 52), gap 46, asked after k1 ended (host wait)."""

    def device(cat, name, ts, dur, corr):
        args = {"correlation": corr, "device": 0, "sycl queue": 3}
        return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": 1, "ts": ts, "dur": dur,
                "args": args}  # fmt: skip

    return [
        _x("user_annotation", "ProfilerStep#1", 0, 100),
        _x("xpu_runtime", "urEnqueueUSMMemcpy", 0, 4, correlation=11),
        device("gpu_memcpy", "Memcpy M2D", 5, 2, 11),
        _x("xpu_runtime", "urEnqueueKernelLaunch", 5, 1, correlation=12),
        device("kernel", "k1", 10, 4, 12),
        _x("xpu_runtime", "urEnqueueKernelLaunch", 50, 2, correlation=13),
        device("kernel", "k2", 60, 2, 13),
    ]


SYNTHETIC = {"waits": waits_events, "xpu_launches": xpu_events}


def _write(folder: Path, job: str) -> Path:
    (folder / f"{job}.json").write_text(json.dumps(_kineto(SYNTHETIC[job]())))
    return folder


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory) -> dict:
    return {job: _load([_write(tmp_path_factory.mktemp(job), job)]) for job in SYNTHETIC}


def test_idle_split_by_hand(synthetic):
    out = idle_split(synthetic["waits"]).set_index("stream")
    cols = ["events", "idle_ns", "host_wait_ns", "kernel_wait_ns", "other_ns"]
    assert out.loc[7, cols].tolist() == [4, 95 * US, 45 * US, 10 * US, 40 * US]
    assert out.loc[20, cols].tolist() == [2, 65 * US, 65 * US, 0, 0]
    assert out.loc[-1, cols].tolist() == [6, 160 * US, 110 * US, 10 * US, 40 * US]
    assert out.loc[-1, "device"] == -1 and out.loc[7, "device"] == 0
    assert out.loc[7, "host_wait_share"] == pytest.approx(45 / 95)
    assert list(out.reset_index()["stream"]) == [-1, 7, 20]  # the rank's total first
    assert out.dtypes["idle_ns"] == np.int64


def test_idle_split_threshold_is_a_keyword(synthetic):
    """A 50 µs threshold turns the 40 µs 'other' gap into kernel wait, not the host waits."""
    out = idle_split(synthetic["waits"], kernel_wait_ns=50 * US).set_index("stream")
    assert out.loc[7, ["host_wait_ns", "kernel_wait_ns", "other_ns"]].tolist() == [
        45 * US,
        50 * US,
        0,
    ]


def test_launch_stats_by_hand(synthetic):
    out = launch_stats(synthetic["waits"])
    assert out["corr"].tolist() == [1, 2, 4, 5, 3, 6]  # by call start; 7 is in the last step
    assert out["launch"].tolist() == [L, L, L, MC, L, L]
    assert out["kind"].tolist() == ["kernel"] * 3 + ["memory"] + ["kernel"] * 2
    assert out["kernel"].tolist()[:3] == ["gemm", "relu", "wait"]
    assert (out["cpu_duration_ns"] // US).tolist() == [5, 4, 4, 60, 10, 2]
    assert (out["gpu_duration_ns"] // US).tolist() == [30, 10, 10, 5, 10, 1]
    # kernel start - call end, clipped at 0 (the copy starts 10 µs before its call returns)
    assert (out["launch_delay_ns"] // US).tolist() == [5, 40, 140, 0, 5, 18]
    assert (out["start_delay_ns"] // US).tolist() == [10, 44, 144, 50, 15, 20]
    assert out["stream"].tolist() == [7, 7, 7, 20, 7, 20]
    assert out["hta"].all()


def test_launch_summary_by_hand(synthetic):
    """HTA's cut-offs: calls over 50 µs (the 60 µs copy call), delays over 100 µs (the
    140 µs wait), device events shorter than a call within the cut-off (tiny: 1 < 2 µs)."""
    for table in (synthetic["waits"], launch_stats(synthetic["waits"])):
        row = launch_summary(table).iloc[0]
        assert row[["rank", "launches"]].tolist() == [0, 6]
        assert row["launch_delay_p50_ns"] == 11.5 * US  # (5 + 18) / 2
        assert row["cpu_duration_p50_ns"] == 4.5 * US
        assert row[["runtime_outliers", "delay_outliers", "short_kernels"]].tolist() == [1, 1, 1]
    assert list(launch_summary(synthetic["waits"]).columns) == device_idle.SUMMARY_COLUMNS


def test_xpu_launches_paired_by_correlation(synthetic):
    """urEnqueue* calls pair with their kernels and copies through the correlation id
    (which HTA does not do: ``hta`` is False)."""
    df = synthetic["xpu_launches"]
    out = launch_stats(df)
    assert out["launch"].tolist() == [
        "urEnqueueUSMMemcpy",
        "urEnqueueKernelLaunch",
        "urEnqueueKernelLaunch",
    ]
    assert out["kernel"].tolist() == ["Memcpy M2D", "k1", "k2"]
    assert (out["launch_delay_ns"] // US).tolist() == [1, 4, 8]
    assert not out["hta"].any()
    idle = idle_split(df).set_index("stream")
    assert idle.loc[3, ["idle_ns", "host_wait_ns", "kernel_wait_ns"]].tolist() == [
        49 * US,
        46 * US,
        3 * US,
    ]


def test_hip_names_are_launches(tmp_path):
    events = [
        _x("cuda_runtime", "hipLaunchKernel", 0, 3, correlation=1),
        _x("kernel", "k", 10, 2, device=0, stream=0, correlation=1),
        _x("cuda_runtime", "hipMemcpyWithStream", 20, 9, correlation=2),
        _x("gpu_memcpy", "Memcpy HtoD", 22, 2, device=0, stream=0, correlation=2),
        _x("cuda_runtime", "hipDeviceSynchronize", 30, 1, correlation=3),
    ]
    path = tmp_path / "hip.json"
    path.write_text(json.dumps(_kineto(events)))
    out = launch_stats(_load([path]))
    assert out["launch"].tolist() == ["hipLaunchKernel", "hipMemcpyWithStream"]
    assert out["kind"].tolist() == ["kernel", "memory"]
    assert (out["launch_delay_ns"] // US).tolist() == [7, 0]


def test_sub_us_rounding_as_hta(tmp_path):
    """HTA rounds a sub-µs trace's starts up and ends down: a 2.6 µs kernel at 10.2 µs
    becomes [11, 12), the next one at 14.9 µs starts at 15: gap 3 µs instead of 2.1 µs."""
    events = [
        _x(C, L, 1.5, 0.5, correlation=1),
        _x("kernel", "a", 10.2, 2.6, device=0, stream=7, correlation=1),
        _x(C, L, 2.5, 0.5, correlation=2),
        _x("kernel", "b", 14.9, 1.0, device=0, stream=7, correlation=2),
    ]
    path = tmp_path / "sub_us.json"
    path.write_text(json.dumps(_kineto(events)))
    df = _load([path])
    assert idle_split(df).iloc[1]["kernel_wait_ns"] == 2100
    assert idle_split(df, microseconds=True).iloc[1]["kernel_wait_ns"] == 3000
    # kernel start - call end: 10.2 - 2.0 and 14.9 - 3.0 exact; 11 - 2 and 15 - 3 rounded
    assert launch_stats(df)["launch_delay_ns"].tolist() == [8200, 11900]
    assert launch_stats(df, microseconds=True)["launch_delay_ns"].tolist() == [9000, 12000]


@pytest.fixture(scope="module")
def hta_synthetic(tmp_path_factory) -> dict[str, dict | str]:
    """HTA's own figures for each synthetic trace, or its error where it fails."""
    env = _hta_env()
    python = env.ensure_hta(quiet=True)
    if python is None:
        missing(f"could not build {env.HTA_VENV} with {' '.join(env.REQUIREMENTS)} (pip)")
    dirs = {job: _write(tmp_path_factory.mktemp(f"hta_{job}"), job) for job in SYNTHETIC}

    def run(folder: Path) -> dict | str:
        try:
            return env.hta_figures(python, folder)
        except RuntimeError as exc:
            return str(exc)

    with ThreadPoolExecutor(len(dirs)) as pool:
        return dict(zip(dirs, pool.map(run, dirs.values()), strict=True))


def test_hta_agrees_on_the_hand_worked_trace(hta_synthetic, synthetic):
    """HTA itself gives the hand-worked idle split and launches of ``waits``."""
    hta = hta_synthetic["waits"]
    assert isinstance(hta, dict), hta
    ours = idle_split(synthetic["waits"]).set_index("stream")
    for row in _hta_rows(hta, "idle_time_breakdown"):
        assert ours.loc[row["stream"], f"{row['idle_category']}_ns"] == row["idle_time"] * US
    theirs = {r["correlation"]: r for r in _hta_rows(hta, "cuda_kernel_launch_stats")}
    stats = launch_stats(synthetic["waits"])
    assert sorted(theirs) == sorted(stats["corr"])
    for row in stats.itertuples():
        assert (row.cpu_duration_ns, row.gpu_duration_ns, row.launch_delay_ns) == tuple(
            theirs[row.corr][c] * US for c in ("cpu_duration", "gpu_duration", "launch_delay")
        )


def test_hta_reads_no_xpu_kernel(hta_synthetic, synthetic):
    """Why the kit pairs XPU launches itself: HTA 0.5.0 takes a device event's stream from
    ``args.stream`` only, so the kernels of an XPU trace (``args["sycl queue"]``) are host
    events to it and its analyses fail for want of GPU events; the kit splits and pairs them."""
    assert isinstance(hta_synthetic["xpu_launches"], str)
    assert "IndexError" in hta_synthetic["xpu_launches"]
    assert len(launch_stats(synthetic["xpu_launches"])) == 3


# --- HTA's rule, one kernel at a time, against the vectorised split -----------------------

# a kernel: (stream, gap after the previous kernel of its stream, duration, when its call
# starts relative to the kernel's start, call duration); all in µs
KERNELS = st.lists(
    st.tuples(
        st.sampled_from([3, 7]),
        st.integers(0, 80),
        st.integers(1, 20),
        st.integers(-150, 0),
        st.integers(0, 60),
    ),
    min_size=1,
    max_size=25,
)


def _table(kernels) -> pd.DataFrame:
    rows, clock = [], {3: 0, 7: 0}
    for corr, (stream, gap, dur, lead, call) in enumerate(kernels):
        start = clock[stream] + gap
        clock[stream] = start + dur
        rows.append(("runtime", "cuda_runtime", L, start + lead, call, corr, -1, -1))
        rows.append(("gpu", "kernel", f"k{corr}", start, dur, corr, 0, stream))
    cols = ["track", "cat", "name", "ts_ns", "dur_ns", "corr", "device", "stream"]
    df = pd.DataFrame(rows, columns=cols).assign(rank=0)
    df[["ts_ns", "dur_ns"]] *= US
    return df


def _one_at_a_time(df: pd.DataFrame) -> dict[int, dict[str, int]]:
    """HTA's loop over a stream's kernels, written out plainly."""
    calls = df[df["track"] == "runtime"].set_index("corr")["ts_ns"]
    out = {}
    for stream, ks in df[df["stream"] >= 0].sort_values("ts_ns").groupby("stream"):
        parts = dict.fromkeys(WAITS, 0)
        prev_end = None
        for k in ks.itertuples():
            if prev_end is not None:
                gap = k.ts_ns - prev_end
                if calls[k.corr] > prev_end:
                    parts["host_wait"] += gap
                elif gap < device_idle.KERNEL_WAIT_NS:
                    parts["kernel_wait"] += gap
                else:
                    parts["other"] += gap
            prev_end = k.ts_ns + k.dur_ns
        out[stream] = parts
    return out


IDLE_SUMS = ["events", "idle_ns", "host_wait_ns", "kernel_wait_ns", "other_ns"]


@settings(max_examples=60, deadline=None)
@given(KERNELS)
def test_idle_split_is_htas_rule_kernel_by_kernel(kernels):
    """On random kernels of two streams, the vectorised split is HTA's rule applied kernel
    by kernel; the parts add up to the stream's span minus its busy time, and the rank's
    total row to its streams."""
    df = _table(kernels)
    out = idle_split(df).set_index("stream")
    for stream, parts in _one_at_a_time(df).items():
        assert {w: out.loc[stream, f"{w}_ns"] for w in WAITS} == parts
        ks = df[df["stream"] == stream]
        span = (ks["ts_ns"] + ks["dur_ns"]).max() - ks["ts_ns"].min()
        assert out.loc[stream, "idle_ns"] == span - ks["dur_ns"].sum() == sum(parts.values())
    assert (out.loc[-1, IDLE_SUMS] == out.loc[out.index >= 0, IDLE_SUMS].sum()).all()
    stats = launch_stats(df)
    assert len(stats) == len(kernels)
    assert (
        stats["launch_delay_ns"]
        == (stats["start_delay_ns"] - stats["cpu_duration_ns"]).clip(lower=0)
    ).all()


# --- errors -------------------------------------------------------------------------------


def test_no_device_events_is_an_error(tmp_path):
    path = tmp_path / "cpu_only.json"
    path.write_text(json.dumps(_kineto([_x("cpu_op", "aten::mm", 0, 10)])))
    df = _load([path])
    with pytest.raises(TraceFormatError, match="no device events.*ProfilerActivity"):
        idle_split(df)
    with pytest.raises(TraceFormatError, match="no device events.*ProfilerActivity"):
        launch_stats(df)


def test_everything_in_the_last_step_is_an_error_that_says_so(tmp_path):
    events = [
        _x("user_annotation", "ProfilerStep#1", 0, 100),
        _x("user_annotation", "ProfilerStep#2", 100, 100),
        _x(C, L, 110, 5, correlation=1),
        _x("kernel", "k", 120, 10, device=0, stream=7, correlation=1),
    ]
    path = tmp_path / "last_step.json"
    path.write_text(json.dumps(_kineto(events)))
    df = _load([path])
    for analysis in (idle_split, launch_stats):
        with pytest.raises(TraceFormatError, match="last ProfilerStep.*active >= 2"):
            analysis(df)


def test_no_runtime_launch_is_an_error_for_launches_only(tmp_path):
    """Kernels without their runtime calls: the idle split still works (no gap can be a
    host wait), the launch stats say what is missing."""
    events = [
        _x("kernel", "a", 0, 10, device=0, stream=7, correlation=1),
        _x("kernel", "b", 50, 10, device=0, stream=7, correlation=2),
    ]
    path = tmp_path / "no_runtime.json"
    path.write_text(json.dumps(_kineto(events)))
    df = _load([path])
    assert idle_split(df).iloc[0][["idle_ns", "host_wait_ns", "other_ns"]].tolist() == [
        40 * US,
        0,
        40 * US,
    ]
    with pytest.raises(TraceFormatError, match="no runtime launch call"):
        launch_stats(df)


def test_not_a_trace_table_is_an_error():
    with pytest.raises(TraceFormatError, match="traces.load"):
        idle_split(pd.DataFrame({"rank": [0]}))


def test_rank_without_device_events_is_named(tmp_path):
    gpu = _kineto(waits_events())
    gpu["distributedInfo"] = {"rank": 0, "world_size": 2}  # the two ranks of one run
    (tmp_path / "r0.json").write_text(json.dumps(gpu))
    cpu = _kineto([_x("cpu_op", "aten::mm", 0, 10)])
    cpu["distributedInfo"] = {"rank": 1, "world_size": 2}
    (tmp_path / "r1.json").write_text(json.dumps(cpu))
    df = _load([tmp_path / "r0.json", tmp_path / "r1.json"])
    assert sorted(df["rank"].unique()) == [0, 1]
    out = idle_split(df)
    assert set(out["rank"]) == {0} and list(out.attrs["skipped"]) == [1]
    assert list(launch_stats(df).attrs["skipped"]) == [1]


# --- the real XPU and ROCm samples --------------------------------------------------------


def _real(shared_traces: Path, parts: tuple[str, str]):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return traces.load([str(shared_traces.joinpath(*parts))])


@pytest.mark.shared_traces
def test_xpu_sample_launches(shared_traces):
    """On the real Aurora trace every device event whose urEnqueue call is in the sample is
    paired; each pair's durations are the kernel's and the call's own, and every kernel
    starts after its call started."""
    df = _real(shared_traces, XPU_SAMPLE)
    out = launch_stats(df)
    runtime = df[(df["track"] == "runtime") & (df["corr"] >= 0)]
    device = df[df["track"].isin(["gpu", "memcpy", "memset"]) & (df["corr"] >= 0)]
    launched = device[device["corr"].isin(runtime["corr"])]
    assert len(out) == len(launched) == 51  # some launches and kernels fell out of the sample
    assert out.groupby("launch").size().to_dict() == {
        "urEnqueueKernelLaunch": 49,
        "urEnqueueUSMMemcpy": 2,
    }
    dur = device.set_index("corr")["dur_ns"]
    call = runtime.set_index("corr")["dur_ns"]
    assert (out["gpu_duration_ns"].to_numpy() == dur.loc[out["corr"]].to_numpy()).all()
    assert (out["cpu_duration_ns"].to_numpy() == call.loc[out["corr"]].to_numpy()).all()
    assert (out["start_delay_ns"] > 0).all()
    delay = (out["start_delay_ns"] - out["cpu_duration_ns"]).clip(lower=0)
    assert out["launch_delay_ns"].equals(delay)
    assert not out["hta"].any()
    summary = launch_summary(out).iloc[0]
    assert summary["launches"] == 51
    assert summary["gpu_duration_p50_ns"] == out["gpu_duration_ns"].median()


@pytest.mark.shared_traces
def test_xpu_sample_idle_split(shared_traces):
    """The kernels of sycl queue 64 run one after another, so the queue's idle time is its
    span minus the kernels' own durations; the copies (queue id above int64) have no stream."""
    df = _real(shared_traces, XPU_SAMPLE)
    out = idle_split(df).set_index("stream")
    assert list(out.index) == [-1, 64]
    kernels = df[(df["stream"] == 64)].sort_values("ts_ns")
    end = kernels["ts_ns"] + kernels["dur_ns"]
    assert (kernels["ts_ns"].to_numpy()[1:] >= end.to_numpy()[:-1]).all()  # no overlap
    span = int(end.max() - kernels["ts_ns"].min())
    assert out.loc[64, "events"] == len(kernels) == 51
    assert out.loc[64, "idle_ns"] == span - int(kernels["dur_ns"].sum())
    parts = out.loc[64, ["host_wait_ns", "kernel_wait_ns", "other_ns"]]
    assert parts.sum() == out.loc[64, "idle_ns"] and (parts > 0).all()


@pytest.mark.shared_traces
def test_rocm_sample_launches(shared_traces):
    """HIP launches (hipLaunchKernel, hipExtModuleLaunchKernel, hipMemcpyWithStream) pair
    with every kernel and copy of the MI250 trace; HTA 0.5.0 pairs none of them."""
    df = _real(shared_traces, ROCM)
    out = launch_stats(df)
    device = df[df["track"].isin(["gpu", "memcpy"])]
    assert len(out) == len(device) == 16
    assert set(out["launch"]) == {
        "hipLaunchKernel",
        "hipExtModuleLaunchKernel",
        "hipMemcpyWithStream",
    }
    assert not out["hta"].any()
    assert (out["gpu_duration_ns"].sum()) == device["dur_ns"].sum()


@pytest.fixture(scope="module")
def hta_rocm(shared_traces: Path, tmp_path_factory) -> dict:
    env = _hta_env()
    python = env.ensure_hta(quiet=True)
    if python is None:
        missing(f"could not build {env.HTA_VENV} with {' '.join(env.REQUIREMENTS)} (pip)")
    folder = tmp_path_factory.mktemp("hta_rocm")
    (folder / ROCM[1]).symlink_to(shared_traces.joinpath(*ROCM))
    return env.hta_figures(python, folder)


@pytest.mark.shared_traces
def test_hta_on_rocm_differs_by_its_time_base(hta_rocm, shared_traces):
    """The ROCm trace, whose ``ts`` count from ``baseTimeNanoseconds`` (torch >= 2.4), is not
    in the exact cross-check, for two reasons this test pins down.

    - HTA 0.5.0's launch stats know no HIP call, so HTA pairs none of the 16 launches.
    - HTA rounds the file's own µs (about 4.2e12), the kit's ``microseconds=True`` the
      absolute time after adding the base (about 1.7e15), where a float64 resolves 0.25 µs
      only: one copy at ...095.010 µs rounds up to 096 for HTA and to 095 for the kit, and
      the stream's host wait is 8,780 µs for HTA and 8,778 µs for the kit. Shifted back to
      the file's time base, the kit's figure is HTA's.
    """
    import gzip

    assert hta_rocm["cuda_kernel_launch_stats"] == []
    idle = {r["idle_category"]: r["idle_time"] for r in _hta_rows(hta_rocm, "idle_time_breakdown")}
    assert idle == {"host_wait": 8780.0, "other": 0.0}
    df = _real(shared_traces, ROCM)
    assert idle_split(df, microseconds=True).iloc[1]["host_wait_ns"] == 8_778_000
    with gzip.open(shared_traces.joinpath(*ROCM)) as f:
        base = json.load(f)["baseTimeNanoseconds"]
    shifted = df.assign(ts_ns=df["ts_ns"] - base)
    assert idle_split(shifted, microseconds=True).iloc[1]["host_wait_ns"] == 8_780_000
    assert len(launch_stats(df)) == 16
