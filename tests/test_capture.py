"""Capture ranges: with HPCPROF_CAPTURE=torch, a trace holds the marked region and nothing else."""

from __future__ import annotations

import json

from hpcprof_kit.profiling import capture, trace_func


def names_in(path):
    events = json.loads(path.read_text())["traceEvents"]
    return {e.get("name") for e in events if e.get("ph") == "X"}


def test_capture_limits_torch_profiler_trace_to_the_region(tmp_path, monkeypatch):
    import torch

    run_dir = tmp_path / "run"
    monkeypatch.setenv("HPCPROF_RUN_DIR", str(run_dir))
    monkeypatch.setenv("HPCPROF_CAPTURE", "torch")
    a = torch.rand(32, 32)
    torch.cumsum(a, 0)  # before the region: must be absent
    with capture("attention"):
        torch.mm(a, a)
    torch.argsort(a)  # after the region: must be absent
    with capture("attention"):
        torch.tanh(a)

    traces = sorted(p.name for p in (run_dir / "traces").iterdir())
    assert traces == ["capture-0-of-1.json", "capture_cycle1-0-of-1.json"]
    first = names_in(run_dir / "traces" / "capture-0-of-1.json")
    second = names_in(run_dir / "traces" / "capture_cycle1-0-of-1.json")
    assert {"attention", "aten::mm"} <= first
    assert not {"aten::cumsum", "aten::argsort", "aten::tanh"} & first
    assert {"attention", "aten::tanh"} <= second
    assert not {"aten::mm", "aten::cumsum", "aten::argsort"} & second
    table = (run_dir / "tables" / "capture-0-of-1.txt").read_text()
    assert "aten::mm" in table and "aten::cumsum" not in table


def test_capture_with_a_given_profiler_and_trace_func(tmp_path):
    import torch
    import torch.profiler

    @trace_func(name="my_block")
    def block(x):
        return torch.relu(x)

    prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU])
    x = torch.rand(8, 8)
    torch.sigmoid(x)
    with capture("region", profiler=prof):
        block(x)
    torch.sigmoid(x)
    out = tmp_path / "t.json"
    prof.export_chrome_trace(str(out))
    names = names_in(out)
    assert {"region", "my_block", "aten::relu"} <= names
    assert "aten::sigmoid" not in names


def test_capture_without_profiler_leaves_no_files_and_no_env(tmp_path, monkeypatch):
    import torch

    monkeypatch.setenv("HPCPROF_RUN_DIR", str(tmp_path))
    monkeypatch.delenv("HPCPROF_CAPTURE", raising=False)
    monkeypatch.delenv("PTI_ENABLE_COLLECTION", raising=False)
    with capture("quiet"):
        torch.ones(2).sum()
    assert list(tmp_path.iterdir()) == []
    import os

    assert "PTI_ENABLE_COLLECTION" not in os.environ
