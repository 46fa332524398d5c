"""``device_idle_host_bound`` advises by what the host did while the device idled (issue 47,
item 3): the DataLoader's advice only when the DataLoader held the idle, the optimizer's step,
a first launch that loads its code, time no op covers; nested host ops counted once.

Each trace: six 10 ms steps; the host does ``work`` (a list of (category, name, start,
duration) in µs into the step) from 100 µs, launches at 5100 µs a kernel that runs from 5200
to 9900 µs. The device idles 5.3 ms a step (53 %): 5.2 ms before the kernel, 0.1 ms after.
"""

from __future__ import annotations

import pytest
from test_findings_misreadings import STREAM, findings, write, x

STEPS = 6
IDLE_MS = 5.3


def steps(work: list[tuple[str, str, float, float]]) -> list[dict]:
    events = []
    for k in range(STEPS):
        t0, corr = k * 10_000, 10 * k + 1
        events += [x("user_annotation", f"ProfilerStep#{k}", t0, 10_000),
                   x("cuda_runtime", "cudaLaunchKernel", t0 + 5100, 5, correlation=corr),
                   x("kernel", "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn", t0 + 5200,
                     4700, stream=STREAM, correlation=corr)]  # fmt: skip
        events += [x(cat, name, t0 + at, dur) for cat, name, at, dur in work]
    return events


LOADER = [("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
           100, 5000), ("cpu_op", "aten::stack", 200, 4000)]  # fmt: skip
OPTIMIZER = [("user_annotation", "Optimizer.step#Shampoo.step", 100, 5000),
             ("cpu_op", "aten::_foreach_mul_", 300, 3000)]  # fmt: skip
NESTED = [("cpu_op", "aten::linear", 100, 5000), ("cpu_op", "aten::addmm", 600, 4000),
          ("cpu_op", "aten::copy_", 1100, 3000)]  # fmt: skip
FIRST_LAUNCH = [("cuda_runtime", "cudaLaunchKernel", 100, 5000)]


def test_the_dataloader_advice_when_the_dataloader_held_the_idle(tmp_path):
    f = findings(write(tmp_path, steps(LOADER)))[0]["device_idle_host_bound"]
    assert f["value"] == pytest.approx(100 * IDLE_MS / 10)
    # 5 ms in __next__ (aten::stack inside it too); 5 µs launching; 0.295 ms untraced
    assert f["evidence"]["host_during_idle_ms_per_step"] == {
        "loader": 5.0, "launch": 0.005, "untraced": 0.295}  # fmt: skip
    assert f["evidence"]["idle_cause"] == ["loader"]
    assert "mostly waiting for the DataLoader's next batch: 5.0 ms a step (94 %)" in f["summary"]
    assert f["advice"].startswith("Load ahead of the device: DataLoader(num_workers=4")


def test_an_optimizer_step_gets_optimizer_advice_not_the_dataloaders(tmp_path):
    f = findings(write(tmp_path, steps(OPTIMIZER)))[0]["device_idle_host_bound"]
    assert f["evidence"]["host_during_idle_ms_per_step"]["optimizer"] == pytest.approx(5.0)
    assert "in the optimizer's step: 5.0 ms a step (94 %), most in aten::_foreach_mul_" in (
        f["summary"])  # fmt: skip
    assert "Shampoo" in f["advice"] and "DataLoader" not in f["advice"]


def test_nested_host_ops_are_counted_once_by_the_innermost(tmp_path):
    """aten::linear (5 ms) holds aten::addmm (4 ms), which holds aten::copy_ (3 ms): each
    gets its own time, and together the 5 ms the device idled, not 12."""
    f = findings(write(tmp_path, steps(NESTED)))[0]["device_idle_host_bound"]
    ops = {o["name"]: o["ms_per_step"] for o in f["evidence"]["innermost_host_ops_during_idle"]}
    assert ops == {"aten::copy_": 3.0, "aten::linear": 1.0, "aten::addmm": 1.0}
    assert sum(ops.values()) == pytest.approx(5.0)
    assert "in its own ops: 5.0 ms a step (94 %), most in aten::copy_" in f["summary"]
    assert "DataLoader(" not in f["advice"]


def test_a_first_launch_gets_a_warm_up_not_fewer_kernels(tmp_path):
    """A 5 ms cudaLaunchKernel on an idle device loads its module: a warm-up step's cost."""
    f = findings(write(tmp_path, steps(FIRST_LAUNCH)))[0]["device_idle_host_bound"]
    assert f["evidence"]["idle_cause"] == ["first_launch"]
    assert f["evidence"]["host_during_idle_ms_per_step"]["first_launch"] == pytest.approx(5.0)
    assert "schedule(wait=1, warmup=1, active=3)" in f["advice"]
    assert "torch.compile" not in f["advice"] and "DataLoader" not in f["advice"]


def test_time_no_op_covers_is_named_untraced(tmp_path):
    f = findings(write(tmp_path, steps([])))[0]["device_idle_host_bound"]
    assert f["evidence"]["host_during_idle_ms_per_step"] == {"launch": 0.005, "untraced": 5.295}
    assert "no traced op covers" in f["summary"] and "with_stack=True" in f["advice"]
    assert "DataLoader" not in f["advice"]


def numbered(every: int) -> list[dict]:
    """Six steps whose host runs three numbered ops (External ids) in its first 0.6 ms, then
    nothing traced until the launch: ids go on one by one (``every`` 3), or jump ``every``
    ids from step to step, as in a copy of the trace that kept blocks of whole events and
    dropped the ones between (a cut or a sample)."""
    events = steps([])
    for k in range(STEPS):
        t0 = k * 10_000
        events += [x("cpu_op", name, t0 + 100 + 200 * i, 150, **{"External id": k * every + i})
                   for i, name in enumerate(("aten::linear", "aten::relu", "aten::sum"))]  # fmt: skip
    return events


def test_a_host_with_no_traced_op_and_whole_ids_is_named_a_stall(tmp_path):
    """The ids go on one by one: the profiler saw every op, and the host really did nothing
    it traces (Python, garbage collection, I/O) while the device idled."""
    found, coverage = findings(write(tmp_path, numbered(3)))
    f = found["device_idle_host_bound"]
    assert f["evidence"]["idle_cause"] == ["untraced"]
    assert "no traced op covers" in f["summary"] and "with_stack=True" in f["advice"]
    assert "device_idle_host_bound" not in coverage


def test_a_trace_that_dropped_most_of_its_events_is_not_judged(tmp_path):
    """The ids jump by 1000 from step to step (18 ops of 5003 ids): the device's empty time
    is events missing, not idle, and the rule says so instead of a finding (the ATPESC XPU
    sample: 97 of 3109 ids)."""
    found, coverage = findings(write(tmp_path, numbered(1000)))
    assert "device_idle_host_bound" not in found
    assert coverage["device_idle_host_bound"] == (
        "not judged: the device of rank(s) 0 shows nothing for most of the step, but its host "
        "shows no op either for 4.8 ms a step, and its ops hold 18 of the 5003 ids in their "
        "range, the rest in a few large holes: the trace dropped most of its events (a cut or "
        "sampled copy), so idle cannot be told from missing; report on the whole trace"
    )
