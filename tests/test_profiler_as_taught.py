"""torch.profiler as the guides teach it (the ATPESC guide; the ALCF Polaris guide): shapes and
memory recorded, the per-rank table sorted by the device's self time with every row, and user
ranges from ``record_function`` and ``@trace_func`` in the trace."""

from __future__ import annotations

import argparse
import json
import re

import pytest

from hpcprof_kit.profiling import (
    SORT_KEYS,
    add_profiler_args,
    make_profiler,
    profiler_from_args,
    record_function,
    table_sort_key,
    trace_func,
)

SCHEDULE = {"wait": 0, "warmup": 1, "active": 2, "repeat": 1}


class Scaler:
    def scale(self, x):
        return x * 2


@trace_func
def preprocess(x):
    return (x - x.mean()) / (x.std() + 1)


def _profile(trace_dir, steps: int = 3, **kw):
    import torch

    prof = make_profiler(schedule=SCHEDULE, activities="cpu", trace_dir=trace_dir, **kw)
    scaler = Scaler()
    scaled = trace_func(scaler.scale)  # a bound method: named by its qualname (Polaris guide)
    with prof:
        for _ in range(steps):
            with record_function("data_preprocessing"):  # the ATPESC guide's user annotation
                x = preprocess(torch.rand(32, 32))
            scaled(x @ x)
            prof.step()
    (trace,) = prof.traces
    _profile.last = prof
    return trace, json.loads(trace.read_text())["traceEvents"]


def test_shapes_and_memory_are_recorded_by_default(tmp_path):
    _, events = _profile(tmp_path / "traces")
    mm = [e for e in events if e.get("name") == "aten::mm"]
    assert mm and all(e["args"]["Input Dims"] == [[32, 32], [32, 32]] for e in mm)
    memory = [e for e in events if e.get("name") == "[memory]"]
    assert memory and all("Bytes" in e["args"] for e in memory)


def test_shapes_and_memory_can_be_turned_off(tmp_path):
    _, events = _profile(tmp_path / "traces", record_shapes=False, profile_memory=False)
    mm = [e for e in events if e.get("name") == "aten::mm"]
    assert mm and not any("Input Dims" in e["args"] for e in mm)
    assert not any(e.get("name") == "[memory]" for e in events)


def test_user_ranges_from_record_function_and_trace_func_are_in_the_trace(tmp_path):
    _, events = _profile(tmp_path / "traces")
    names = {e["name"] for e in events if e.get("cat") == "user_annotation"}
    assert {"data_preprocessing", "preprocess", "Scaler.scale"} <= names
    # two recorded steps: each range twice
    pre = [e for e in events if e.get("name") == "preprocess" and e.get("cat") == "user_annotation"]
    assert len(pre) == 2


def _table(tmp_path, trace) -> tuple[str, list[dict[str, str]]]:
    """The table file's first line, and its rows as {column: cell}."""
    first, *lines = (
        (tmp_path / "tables" / trace.name.replace(".json", ".txt")).read_text().splitlines()
    )
    rules = [i for i, r in enumerate(lines) if r.startswith("---")]
    cols = re.split(r"\s{2,}", lines[rules[0] + 1].strip())
    body = lines[rules[1] + 1 : rules[2]]
    return first, [dict(zip(cols, re.split(r"\s{2,}", r.strip()), strict=True)) for r in body]


def test_the_table_is_sorted_by_self_cpu_with_every_row_on_a_cpu_run(tmp_path):
    trace, _ = _profile(tmp_path / "traces")
    first, rows = _table(tmp_path, trace)
    assert first == "key_averages().table(sort_by='self_cpu_time_total', row_limit=-1): all rows"
    self_cpu = [r["Self CPU"] for r in rows]
    assert len(rows) == len(_profile.last.key_averages())  # no cut: every op is listed

    def us(text: str) -> float:
        value, unit = re.fullmatch(r"([\d.]+)(us|ms|s)", text).groups()
        return float(value) * {"us": 1, "ms": 1e3, "s": 1e6}[unit]

    times = [us(t) for t in self_cpu]
    assert times == sorted(times, reverse=True)


def test_table_rows_can_cut_the_table(tmp_path):
    trace, _ = _profile(tmp_path / "traces", table_rows=5)
    first, rows = _table(tmp_path, trace)
    assert first.endswith("row_limit=5): top 5 rows") and len(rows) == 5


def test_one_function_picks_the_sort_key_from_the_device():
    assert table_sort_key(["cpu", "xpu"]) == "self_xpu_time_total"  # the ATPESC guide's key
    assert table_sort_key(["cpu", "cuda"]) == "self_cuda_time_total"
    assert table_sort_key(["cpu"]) == "self_cpu_time_total"
    assert table_sort_key("xpu") == SORT_KEYS["xpu"]


@pytest.mark.parametrize("key", sorted(set(SORT_KEYS.values())))
def test_torch_accepts_every_sort_key_on_this_cpu(key):
    import torch
    import torch.profiler as tp

    with tp.profile(activities=[tp.ProfilerActivity.CPU]) as prof:
        torch.ones(8, 8).sum()
    assert "aten::sum" in prof.key_averages().table(sort_by=key, row_limit=-1)


def test_flags_default_to_shapes_and_memory_and_every_row(tmp_path):
    parser = add_profiler_args(argparse.ArgumentParser())
    args = parser.parse_args(["--profile"])
    assert (args.record_shapes, args.profile_memory, args.table_rows) == (True, True, -1)
    off = parser.parse_args(["--profile", "--no-record-shapes", "--no-profile-memory"])
    assert (off.record_shapes, off.profile_memory) == (False, False)
    old = parser.parse_args(["--record-shapes", "--profile-memory"])  # old scripts still parse
    assert (old.record_shapes, old.profile_memory) == (True, True)
    prof = profiler_from_args(off, 0, 1, trace_dir=tmp_path)
    assert not prof.profile.record_shapes and not prof.profile.profile_memory
