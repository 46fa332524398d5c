"""The train app leaves the device asynchronous unless --sync-steps asks for a synchronize after
each phase (forward, backward, optimizer), so its traces show launches running ahead."""

from __future__ import annotations

import json

import pytest
import torch

from hpcprof_kit.apps import train


def test_sync_steps_is_off_by_default():
    assert train.build_parser().parse_args([]).sync_steps is False
    assert train.build_parser().parse_args(["--sync-steps"]).sync_steps is True


@pytest.mark.parametrize("kind", ["cuda", "xpu"])
def test_the_device_is_synchronized_only_when_asked(monkeypatch, kind):
    calls = []
    monkeypatch.setattr(getattr(torch, kind), "synchronize", lambda: calls.append(kind))
    train.device_sync(torch.device(kind), sync_steps=False)()
    assert calls == []
    train.device_sync(torch.device(kind), sync_steps=True)()
    assert calls == [kind]
    train.device_sync(torch.device("cpu"), sync_steps=True)()  # nothing to wait for on a CPU
    assert calls == [kind]


def test_the_timings_record_whether_steps_were_synchronized(tmp_path, monkeypatch):
    monkeypatch.delenv("HPCPROF_RUN_DIR", raising=False)
    args = ["--epochs", "1", "--steps-per-epoch", "3", "--timings-dir", str(tmp_path)]
    assert train.main(args) == 0
    (record,) = [json.loads(p.read_text()) for p in tmp_path.glob("*.json")]
    assert record["params"]["sync_steps"] is False
    assert len(record["timings"]["step"]) == 2  # 3 steps, the first left out (--warmup 1)
