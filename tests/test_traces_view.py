"""The run is prepared once a report (``view.run_view.RunView``): every pane and every rule reads
the one view, so the step breakdown, the signals and the device's idle split are computed once,
and a report of per-rank summaries (``--mpi``) computes none of them again."""

from __future__ import annotations

import collections
import functools
import importlib
import sys

import pytest

from hpcprof_kit import traces
from hpcprof_kit.traces.corpus import corpus_run
from hpcprof_kit.traces.reporting.report import report, report_from_summary
from hpcprof_kit.traces.view.run_view import RunView
from hpcprof_kit.traces.view.summary import summarise

COUNTED = {
    "hpcprof_kit.traces.analyses.breakdown": ("step_breakdown",),
    "hpcprof_kit.traces.view.signals": ("signals",),
    "hpcprof_kit.traces.analyses.device_idle": ("idle_split",),
}


@pytest.fixture
def calls(monkeypatch):
    """Counts the calls of each function in COUNTED, wherever a module of the kit holds it."""
    counts: collections.Counter = collections.Counter()
    for module_name, names in COUNTED.items():
        module = importlib.import_module(module_name)
        for name in names:
            original = getattr(module, name)

            @functools.wraps(original)
            def counted(*args, _name=name, _original=original, **kwargs):
                counts[_name] += 1
                return _original(*args, **kwargs)

            # the defining module, and every module that imported the name itself
            for holder in list(sys.modules.values()):
                if getattr(holder, "__name__", "").startswith("hpcprof_kit") and (
                    getattr(holder, name, None) is original
                ):
                    monkeypatch.setattr(holder, name, counted)
    return counts


@pytest.fixture(scope="module")
def gpu_run(tmp_path_factory):
    """A generated multi-rank GPU run with steps, copies and collectives (corpus seed 5)."""
    folder = tmp_path_factory.mktemp("corpus")
    corpus_run(5).write(folder)
    return traces.load(folder, cache=False)


def test_a_report_prepares_the_run_once(gpu_run, calls):
    rep = report(gpu_run)
    assert dict(calls) == {"step_breakdown": 1, "signals": 1, "idle_split": 1}
    assert rep.panes["overview"].tables["idle_split"].shape[0] > 0  # the idle split was used
    assert rep.findings.coverage is not None


def test_the_view_holds_what_the_panes_and_rules_read(gpu_run, calls):
    view = RunView.of(gpu_run)
    assert dict(calls) == {"step_breakdown": 1, "signals": 1}  # the idle split: when asked
    first = view.idle
    assert view.idle is first and calls["idle_split"] == 1
    assert view.df.attrs == {} and view.table is gpu_run
    assert sorted(view.sig["rank"].unique()) == sorted(view.b["rank"].unique())


def test_an_mpi_report_computes_nothing_of_the_run_again(gpu_run, calls):
    run = summarise(gpu_run)
    calls.clear()
    rep = report_from_summary(run)
    assert dict(calls) == {}
    assert rep.panes["overview"].missing["idle_split"].startswith("not kept in the per-rank")


def _step_with_items(path, device_item: bool):
    """One step: a 1 ms kernel; meanwhile the host reads a scalar (``.item()``), of a device
    tensor (a copy and a stream sync inside it) or of a CPU tensor (nothing inside it); the
    device then idles 0.5 ms before the next kernel."""
    import json

    x = {"ph": "X", "pid": 1, "tid": 1}
    events = [
        {**x, "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0, "dur": 2000},
        {**x, "cat": "cpu_op", "name": "aten::item", "ts": 900, "dur": 150},
        {**x, "cat": "cpu_op", "name": "aten::_local_scalar_dense", "ts": 905, "dur": 140},
        {"ph": "X", "pid": 0, "tid": 7, "cat": "kernel", "name": "gemm", "ts": 0, "dur": 1000,
         "args": {"device": 0, "stream": 7, "correlation": 1}},
        {"ph": "X", "pid": 0, "tid": 7, "cat": "kernel", "name": "gemm", "ts": 1550, "dur": 100,
         "args": {"device": 0, "stream": 7, "correlation": 2}},
    ]  # fmt: skip
    if device_item:
        events += [
            {**x, "cat": "cuda_runtime", "name": "cudaMemcpyAsync", "ts": 910, "dur": 5},
            {**x, "cat": "cuda_runtime", "name": "cudaStreamSynchronize", "ts": 920, "dur": 120},
        ]
    path.write_text(json.dumps({"traceEvents": events}))
    return traces.load(path, cache=False)


def test_a_cpu_tensors_item_is_no_sync_and_a_device_tensors_is(tmp_path):
    from hpcprof_kit.traces.view.signals import sync_gaps

    cpu = sync_gaps(_step_with_items(tmp_path / "cpu-0-of-1.json", device_item=False))
    assert cpu.empty  # an optimizer's step counter: nothing waited for
    gpu = sync_gaps(_step_with_items(tmp_path / "gpu-0-of-1.json", device_item=True))
    assert sorted(gpu["name"]) == ["aten::_local_scalar_dense", "cudaStreamSynchronize"]
    # the device idles from each call's end (1045 µs, 1040 µs) to the next kernel (1550 µs)
    assert dict(zip(gpu["name"], gpu["idle_after_ns"], strict=True)) == {
        "aten::_local_scalar_dense": 505_000, "cudaStreamSynchronize": 510_000}  # fmt: skip
