"""A real CUDA trace written by the kit's own train app on an H100 (1 rank, nccl, the default
profiler schedule; one run eager, one with --compile; see docs/gpu-check.md), read back here:
what a Polaris attendee's first trace holds, without a GPU in CI."""

from __future__ import annotations

import gzip
import json
import warnings
from pathlib import Path

import pytest

from hpcprof_kit import traces

HERE = Path(__file__).resolve().parent / "fixtures" / "traces" / "cuda_h100"


def _load(name: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return traces.load(HERE / f"{name}-0-of-1.json.gz", cache=False)


@pytest.fixture(scope="module")
def eager():
    return _load("eager")


def test_the_rank_the_backend_and_the_recorded_steps(eager):
    info = eager.attrs["ranks"][0]
    assert (info["world_size"], info["backend"]) == (1, "nccl")
    steps = sorted(int(s) for s in eager["step"].unique() if s >= 0)
    assert steps == [2, 3]  # schedule(wait=1, warmup=1, active=2): steps 2 and 3


def test_device_activity_is_on_the_gpu_tracks(eager):
    on_device = eager[eager["device"].to_numpy() == 0]
    assert set(on_device["cat"].astype(str)) == {"kernel", "gpu_memcpy", "gpu_memset"}
    kernels = traces.top_kernels(eager, n=100)
    assert kernels["count"].sum() == (eager["track"].astype(str) == "gpu").sum() == 450


def test_on_one_rank_the_all_reduce_launches_no_kernel(eager):
    """DDP still calls the collective on a world of 1 (the host ranges are there), but NCCL
    has nothing to exchange and launches no kernel: no device time is communication."""
    comm = eager[eager["track"].astype(str) == "comm"]
    assert set(comm["name"].astype(str)) == {"c10d::allreduce_", "record_param_comms",
                                             "nccl:all_reduce"}  # fmt: skip
    assert (comm["device"] < 0).all()
    assert not any("nccl" in n.lower() for n in traces.top_kernels(eager, n=100).index)


def test_a_tiny_model_on_an_h100_leaves_the_device_mostly_idle(eager):
    """The lesson of this trace: the device computes well under a tenth of each step; the host
    (Python, launches, the optimizer) sets the pace."""
    bd = traces.step_breakdown(eager)
    assert (bd["compute_ns"] < 0.1 * bd["wall_ns"]).all()


def test_the_memory_events_hold_host_and_device_allocations():
    raw = json.loads(gzip.decompress((HERE / "eager-0-of-1.json.gz").read_bytes()))
    memory = [e["args"] for e in raw["traceEvents"] if e.get("name") == "[memory]"]
    devices = {a["Device Id"] for a in memory}
    assert devices == {-1, 0}
    assert all({"Bytes", "Total Allocated", "Total Reserved"} <= set(a) for a in memory)


def test_the_compiled_run_shows_its_compiled_regions():
    compiled = _load("compiled")
    regions = {n for n in compiled["name"].astype(str).unique() if "Torch-Compiled Region" in n}
    assert regions == {f"Torch-Compiled Region: {i}/0" for i in range(3)}


def test_host_events_belong_to_the_host_step_not_to_its_short_device_mirror(eager):
    """CUDA traces mirror each ProfilerStep on the device (a ~1.5 us gpu_user_annotation that
    starts inside the host's step); events after it are still in the host's step."""
    host = eager[eager["track"].astype(str).isin(["cpu", "instant"])]
    steps = host[host["name"].astype(str).str.startswith("ProfilerStep#")]
    for _, span in steps.iterrows():
        inside = host[(host["ts_ns"] >= span["ts_ns"])
                      & (host["ts_ns"] < span["ts_ns"] + span["dur_ns"])]  # fmt: skip
        assert len(inside) > 500 and (inside["step"] == span["step"]).all()
    peaks = traces.memory_peaks(eager)
    assert sorted(peaks.loc[peaks["device"] == 0, "step"]) == [2, 3]
