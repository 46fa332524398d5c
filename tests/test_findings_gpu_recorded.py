"""The run report on real GPU runs: the pathologies app recorded on an H100, one problem per
run (tests/fixtures/traces/gpu_pathologies, README there). Each planted problem is named, with
its ranks and steps; the run without a problem gets no finding. What a GPU adds to the CPU
runs of tests/test_pathologies.py: the device-side kinds (pageable and blocking copies, fp32
GEMMs, allocations that bypass the caching allocator) and real launch pacing."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from hpcprof_kit import traces
from hpcprof_kit.traces.reporting.report import report

HERE = Path(__file__).resolve().parent / "fixtures" / "traces" / "gpu_pathologies"
RECORDED = list(range(1, 8))  # step 0 is the profiler's warm-up
# the device idling while the host works follows from every host-side problem: implied
IMPLIED = {"device_idle_host_bound"}


def _found(case: str) -> dict[str, dict]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = report(traces.load(HERE / case / "traces", cache=False))
    return {f["kind"]: f for f in rep.findings}


def test_every_case_ran_on_the_gpu_and_exited_0():
    cases = json.loads((HERE / "cases.json").read_text())
    assert [c["case"] for c in cases] == ["none", "data_loading", "synchronize_in_step",
                                          "launch_bound", "allocator_churn", "pageable_copy",
                                          "sync_copy", "no_tensor_cores", "straggler",
                                          "straggler_none", "unseen"]  # fmt: skip
    assert all(c["exit"] == [0] * c["ranks"] for c in cases)
    assert "NVIDIA H100 80GB HBM3" in (HERE / "device.txt").read_text()
    first = (HERE / "none" / "stdout-0.txt").read_text()
    assert "device=cuda:0 backend=nccl" in first


def test_the_run_without_a_problem_gets_no_finding():
    assert _found("none") == {}


@pytest.mark.parametrize(
    ("case", "summary"),
    [
        ("pageable_copy", "copies of 67 MB from pageable host memory to the device"),
        ("sync_copy", "for device-to-host copies (67 MB a step) of 4"),
        ("allocator_churn", "4 device allocations and frees a step"),
        ("launch_bound", "tiny kernels a step leave the device idle"),
        ("no_tensor_cores", "100 % of the GEMM time"),
        ("synchronize_in_step", "the device sits idle for 30.3 % of the step"),
    ],
)
def test_each_problem_is_named_on_rank_0_in_every_recorded_step(case, summary):
    found = _found(case)
    assert set(found) - IMPLIED == {case}
    assert (found[case]["ranks"], found[case]["steps"]) == ([0], RECORDED)
    assert summary in found[case]["summary"]


def test_the_sync_is_traced_to_item_and_the_batch_copy():
    called = _found("synchronize_in_step")["synchronize_in_step"]["evidence"]["called_from"]
    assert called["aten::item"] == 14  # loss.item(), each of the 7 recorded steps
    assert "aten::to" in called  # the batch copied from pageable memory, not non_blocking


def test_the_fp32_gemms_are_named_by_their_ffma_kernels_and_the_advice_names_bf16():
    f = _found("no_tensor_cores")["no_tensor_cores"]
    assert f["evidence"]["devices"] == ["NVIDIA H100 80GB HBM3"]
    assert f["evidence"]["fp32_gemm_ms_per_step"] == f["evidence"]["gemm_ms_per_step"]
    assert "bf16 autocast" in f["advice"] and "allow_tf32" in f["advice"]


def test_the_slow_dataloader_is_named_with_its_wait():
    found = _found("data_loading")
    assert set(found) - IMPLIED == {"data_loading"}
    loading = found["data_loading"]
    assert loading["ranks"] == [0] and len(loading["steps"]) >= 5
    assert 14 < loading["evidence"]["loader_ms_per_step"] < 20  # the collate sleeps 15 ms


def test_the_intermittent_straggler_is_rank_1_in_steps_3_and_5():
    found = _found("straggler")
    assert (found["straggler"]["ranks"], found["straggler"]["steps"]) == ([1], [3, 5])
    assert found["straggler"]["evidence"]["pattern"] == "intermittent"
    # gloo on a GPU: the batch copied without non_blocking waits for the device each step
    assert set(found) == {"straggler", "synchronize_in_step"}
    assert "aten::to" in found["synchronize_in_step"]["evidence"]["called_from"]
    assert "straggler" not in _found("straggler_none")


def test_the_unseen_run_names_the_pageable_copy_and_the_sync():
    found = _found("unseen")
    assert {"pageable_copy", "synchronize_in_step"} <= set(found)
    assert found["pageable_copy"]["ranks"] == [0, 1]
    assert "aten::item" in found["synchronize_in_step"]["evidence"]["called_from"]
    assert not {"no_tensor_cores", "allocator_churn", "sync_copy", "launch_bound"} & set(found)


@pytest.mark.parametrize(("case", "kind"), [("pageable_copy", "pageable_copy"),
                                            ("no_tensor_cores", "no_tensor_cores")])  # fmt: skip
def test_the_report_reads_no_trace_file_again(tmp_path, monkeypatch, case, kind):
    """The loader keeps the arguments the rules read (copy bytes, input types): the report
    names the same problem, with the same numbers, with every search of the trace files for
    arguments refused, as it did when it searched them."""
    from hpcprof_kit.traces.read import event_args_files
    from hpcprof_kit.traces.view import args as fargs

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = traces.load(HERE / case / "traces", cache=False)
        old = {r: {k: v for k, v in m.items() if k != "event_args"}
               for r, m in df.attrs["ranks"].items()}  # fmt: skip
        before = report(df.copy().pipe(lambda d: d.attrs.update(ranks=old) or d)).findings

    def refused(path, *_):
        raise AssertionError(f"the report searched {path} for arguments")

    monkeypatch.setattr(fargs, "file_args", refused)
    monkeypatch.setattr(event_args_files, "file_event_args", refused)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        after = report(df).findings
    assert [f["kind"] for f in after] == [f["kind"] for f in before]
    assert kind in {f["kind"] for f in after}
    assert json.dumps(after, default=str) == json.dumps(before, default=str)


def test_kept_arguments_that_went_through_json_are_searched_for_again():
    """pandas writes a table's attrs as JSON into a parquet file's metadata: the kept
    arguments become their summary text there, and the report, given that, searches the
    trace files for them and names the same problems with the same numbers."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = traces.load(HERE / "pageable_copy" / "traces", cache=False)
        before = report(df).findings
        text = json.loads(json.dumps(df.attrs))  # as pandas writes and reads it back
        back = df.copy()
        back.attrs = {"ranks": {int(r): m for r, m in text["ranks"].items()}}
        assert back.attrs["ranks"][0]["event_args"].startswith("event arguments kept: ")
        after = report(back).findings
    assert "pageable_copy" in {f["kind"] for f in after}
    assert json.dumps(after, default=str) == json.dumps(before, default=str)
