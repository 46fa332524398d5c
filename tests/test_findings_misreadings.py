"""Misreadings of real traces (issue 47), each on a small Kineto trace of its shape: the
finding a user reads, with the number it states, as the raw events say it should be.

Every trace here is written by hand in µs (the events' own unit), so each expected number
is worked from the events listed, not from a run of the kit.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from hpcprof_kit import traces
from hpcprof_kit.traces.findings import find
from hpcprof_kit.traces.view.run_view import RunView

PID, HOST, STREAM, COMM_STREAM = 1, 1, 7, 20


def x(cat: str, name: str, ts: float, dur: float, tid: int = HOST, **args) -> dict:
    """A complete event; a device event (``stream`` given) on the device's pid and stream."""
    on_device = "stream" in args
    if on_device:
        args = {"device": 0, **args}
    return {"ph": "X", "cat": cat, "name": name, "pid": 0 if on_device else PID,
            "tid": args["stream"] if on_device else tid, "ts": ts, "dur": dur,
            "args": args}  # fmt: skip


def write(folder: Path, events: list[dict], **meta) -> Path:
    path = folder / "trace-0-of-1.json"
    doc = {"traceEvents": events, "distributedInfo": {"rank": 0, "world_size": 1}, **meta}
    path.write_text(json.dumps(doc))
    return path


def findings(path: Path) -> tuple[dict[str, dict], dict[str, str]]:
    """The findings by kind, and the rules that did not run with why."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = find(RunView.of(traces.load(path, cache=False)))
    return {f["kind"]: f for f in found}, found.coverage


# --- launch_bound: a gap another stream filled is no idle ----------------------------------

STEP_US, STEPS, TINY, EVERY = 3000, 6, 100, 15


def launch_paced_steps(collective_us: float) -> list[dict]:
    """Six 3 ms steps. In each, 100 tiny kernels of 5 µs on stream 7, one every 15 µs from
    100 µs into the step, each launched 2 µs before it starts: 99 gaps of 10 µs, 0.99 ms of
    launch pacing on their stream. An NCCL kernel on stream 20 runs from the first tiny
    kernel for ``collective_us``: the gaps inside it leave the device busy."""
    events, corr = [], 0
    for k in range(STEPS):
        t0 = k * STEP_US
        events.append(x("user_annotation", f"ProfilerStep#{k}", t0, STEP_US))
        for i in range(TINY):
            corr += 1
            at = t0 + 100 + i * EVERY
            events += [x("cuda_runtime", "cudaLaunchKernel", at - 3, 1, correlation=corr),
                       x("kernel", "tiny_elementwise_kernel", at, 5, stream=STREAM,
                         correlation=corr)]  # fmt: skip
        if collective_us:
            corr += 1
            events += [x("cuda_runtime", "cudaLaunchKernel", t0 + 90, 2, correlation=corr),
                       x("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)",
                         t0 + 100, collective_us, stream=COMM_STREAM, correlation=corr)]  # fmt: skip
    return events


def test_launch_bound_counts_the_whole_gap_when_no_other_stream_runs(tmp_path):
    found, _ = findings(write(tmp_path, launch_paced_steps(0)))
    f = found["launch_bound"]
    assert f["gain_ms_per_step"] == pytest.approx(0.99)  # 99 gaps of 10 µs
    assert f["evidence"]["tiny_kernels_per_step"] == 99
    assert f["value"] == pytest.approx(100 * 0.99 / 3, abs=1e-3)


def test_launch_bound_counts_no_gap_a_collective_filled(tmp_path):
    """The all-reduce covers the first 50 gaps (it ends as the 51st kernel starts): only the
    49 gaps after it are the device's idle, 0.49 ms a step, not 0.99."""
    found, _ = findings(write(tmp_path, launch_paced_steps(750)))
    f = found["launch_bound"]
    assert f["gain_ms_per_step"] == pytest.approx(0.49)
    assert f["evidence"]["tiny_kernels_per_step"] == 49
    assert "0.5 ms" in f["summary"]


def test_launch_bound_is_silent_when_a_collective_runs_through_every_gap(tmp_path):
    found, _ = findings(write(tmp_path, launch_paced_steps(99 * EVERY + 5)))
    assert "launch_bound" not in found


def test_launch_bound_never_claims_more_than_the_steps_device_idle(tmp_path):
    """A copy on a third stream runs from 600 µs into each step to its end: the device idles
    only in the step's first 600 µs, 430 µs of them (34 tiny kernels run there). All of it
    is before a tiny kernel (100 µs before the first, then 33 gaps of 10 µs): the launches
    cost 0.43 ms a step, not the 0.99 ms their own stream shows."""
    events = launch_paced_steps(0)
    for k in range(STEPS):
        events.append(x("gpu_memcpy", "Memcpy DtoD (Device -> Device)", k * STEP_US + 600,
                        STEP_US - 600, stream=30, correlation=10_000 + k))  # fmt: skip
    path = write(tmp_path, events)
    found, _ = findings(path)
    view = RunView.of(traces.load(path, cache=False))
    idle_ms = float((view.rows["host_ns"] + view.rows["idle_ns"]).median()) / 1e6
    assert idle_ms == pytest.approx(0.43)
    f = found["launch_bound"]
    assert f["gain_ms_per_step"] == pytest.approx(0.43)
    assert f["gain_ms_per_step"] <= idle_ms
