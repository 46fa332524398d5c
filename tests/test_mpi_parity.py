"""``--mpi`` finds what the table finds: each misreading of issue 47, fixed on the table's
path, gives the same finding (kind, ranks, steps, value, summary, advice, gain and the
evidence the summaries hold) from per-rank summaries written to disk and read back, as
``hpcprof-kit traces report --mpi`` gathers them.

The traces are the hand-written shapes of ``test_findings_misreadings``; each case names
the finding it must hold and a number the user reads in it, so a rule silent on both paths
cannot pass.
"""

from __future__ import annotations

import warnings

import pytest
from test_findings_misreadings import (
    A100,
    V100,
    blocking_copy_steps,
    exposed_collective_steps,
    fp32_gemm_steps,
    launch_paced_steps,
    unstepped_run,
    write,
)
from test_idle_cause import LOADER, OPTIMIZER, steps

from hpcprof_kit import traces
from hpcprof_kit.traces.reporting.report import report, report_from_summary
from hpcprof_kit.traces.reporting.summary_store import read_summary, write_summary
from hpcprof_kit.traces.view.summary import combine, summarise_rank

NCCL8 = {"distributedInfo": {"rank": 0, "world_size": 8, "backend": "nccl"}}
CASES = {
    # a gap the all-reduce filled is no idle: 49 gaps of 10 µs
    "launch_bound": (lambda: launch_paced_steps(750), {}, "launch_bound", "gain_ms_per_step",
                     0.49),
    # a 2 µs copy the host waits 5.89 ms for, in .item() and in a synchronous cudaMemcpy
    "item": (lambda: blocking_copy_steps("item", then_us=100), {}, "sync_copy", "value", 58.9),
    "cudaMemcpy": (lambda: blocking_copy_steps("cpu", then_us=500), {}, "sync_copy",
                   "gain_ms_per_step", 0.502),
    # cuDNN's dgrad_engine<float, ...> counted fp32: 5 of 5 ms
    "fp32_volta": (fp32_gemm_steps, {"deviceProperties": V100}, "no_tensor_cores", "value",
                   100.0),
    "fp32_ampere": (fp32_gemm_steps, {"deviceProperties": A100}, "no_tensor_cores", "value",
                    100.0),
    # the all-to-all named by its host op, its size by record_param_comms
    "alltoall": (exposed_collective_steps, {"deviceProperties": A100, **NCCL8},
                 "exposed_communication", "value", 40.0),
    "bus_bandwidth": (exposed_collective_steps, {"deviceProperties": A100, **NCCL8},
                      "low_bus_bandwidth", "value", 100 * (8 << 20) * 4 * 7 / 8 / 3e6 / 230),
    # what the host did while the device idled: the DataLoader, the optimizer's step
    "idle_loader": (lambda: steps(LOADER), {}, "device_idle_host_bound", "value", 53.0),
    "idle_optimizer": (lambda: steps(OPTIMIZER), {}, "device_idle_host_bound", "value", 53.0),
    # start-up (3.1 s) set apart on a trace without steps: 99 gaps of 5 ms in 995 ms
    "startup": (lambda: unstepped_run(5_000), {}, "device_idle_host_bound", "value",
                100 * 99 * 5 / 995),
}  # fmt: skip


def both(path, tmp_path):
    """The findings of the table, and of the per-rank summaries stored and read back."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = traces.load(path, cache=False)
        whole = report(df).findings
        stored = [write_summary(summarise_rank(df), tmp_path / "summaries")]
        parts = report_from_summary(combine([read_summary(p) for p in stored])).findings
    return whole, parts


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_summaries_give_the_tables_finding(tmp_path, case):
    events, meta, kind, field, expected = CASES[case]
    whole, parts = both(write(tmp_path, events(), **meta), tmp_path)
    mine = {f["kind"]: f for f in parts}
    assert mine[kind][field] == pytest.approx(expected, abs=1e-3)
    keys = ("kind", "ranks", "steps", "value", "threshold", "unit", "summary", "advice",
            "gain_ms_per_step")  # fmt: skip
    assert [{k: f.get(k) for k in keys} for f in parts] == [
        {k: f.get(k) for k in keys} for f in whole]  # fmt: skip
    for a, b in zip(parts, whole, strict=True):
        held = {k: v for k, v in a["evidence"].items() if v is not None}
        assert held == {k: b["evidence"].get(k) for k in held}, a["kind"]


def test_the_summary_keeps_the_gpu_generation(tmp_path):
    """On a V100 the summaries' no_tensor_cores advises fp16 autocast with GradScaler, as the
    table's does: the summary keeps the devices' properties."""
    _, parts = both(write(tmp_path, fp32_gemm_steps(), deviceProperties=V100), tmp_path)
    f = next(f for f in parts if f["kind"] == "no_tensor_cores")
    assert f["evidence"]["generation"] == "fp16 only"
    assert f["evidence"]["devices"] == ["Tesla V100-SXM2-32GB"]
    assert "GradScaler" in f["advice"] and "allow_tf32" not in f["advice"]


@pytest.mark.parametrize("every", [3, 1000])
def test_the_summaries_judge_a_trace_that_dropped_events_as_the_table_does(tmp_path, every):
    """A host with no traced op while the device idles: a stall where the op ids go on one by
    one, not judged where they jump (events dropped); the summaries keep each rank's ids."""
    from test_idle_cause import numbered

    path = write(tmp_path, numbered(every))
    whole, parts = both(path, tmp_path)
    assert [f["kind"] for f in parts] == [f["kind"] for f in whole]
    assert ("device_idle_host_bound" in [f["kind"] for f in parts]) == (every == 3)
    assert parts.coverage.get("device_idle_host_bound") == whole.coverage.get(
        "device_idle_host_bound"
    )
