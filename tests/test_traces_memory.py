"""Memory from the ``[memory]`` events of ``profile_memory=True``: the timeline is what torch
wrote, the attribution to ops is torch's own ``key_averages()`` self CPU memory, the peaks are
the trace's own maxima, and a trace recorded without memory says how to get it."""

from __future__ import annotations

import gzip
import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hpcprof_kit import traces
from hpcprof_kit.errors import KitWarning, SpecError, TraceFormatError
from hpcprof_kit.traces.analyses import memory as M
from hpcprof_kit.traces.read import stream
from hpcprof_kit.traces.read.memory_events import file_memory_events, of_kept

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "traces"
MEMORY = FIXTURES / "memory"  # 2 DDP ranks x 2 schedule cycles, recorded by record.py there
OUTSIDE_AS_TORCH = {M.OUTSIDE: "[memory]"}  # torch's key_averages name for events outside ops


def _load(path) -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return traces.load(path, cache=False, workers=1)


def _self_bytes(by_op: pd.DataFrame) -> dict[str, int]:
    """memory_by_op as torch's {key: self_cpu_memory_usage}, the zeros left out as torch's are."""
    host = by_op[by_op["device"] == -1]
    return {
        OUTSIDE_AS_TORCH.get(op, op): int(s)
        for op, s in zip(host["op"], host["self_bytes"], strict=True)
        if s
    }


def _raw_memory_events(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        return [e for e in json.load(fh)["traceEvents"] if e.get("name") == "[memory]"]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A real run: torch.profiler on CPU, profile_memory=True, a schedule over 5 steps of a
    small model; the trace exported with export_chrome_trace and torch's own per-op numbers."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
    prof = profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
        record_shapes=True,
        profile_memory=True,
    )
    prof.start()
    for _ in range(5):
        with record_function("forward"):
            loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        prof.step()
    prof.stop()
    path = tmp_path_factory.mktemp("memory") / "train-0-of-1.json"
    prof.export_chrome_trace(str(path))
    by_torch = {e.key: e.self_cpu_memory_usage for e in prof.key_averages()}
    return path, {k: v for k, v in by_torch.items() if v}


def test_timeline_is_what_torch_wrote_and_its_running_sum_is_total_allocated(recorded):
    path, _ = recorded
    raw = _raw_memory_events(path)
    tl = traces.memory_timeline(_load(path))
    assert len(raw) > 20 and len(tl) == len(raw)  # one row per [memory] event
    # a single thread: time order is file order, each field as torch wrote it
    assert tl["bytes"].tolist() == [e["args"]["Bytes"] for e in raw]
    assert tl["allocated_bytes"].tolist() == [e["args"]["Total Allocated"] for e in raw]
    assert tl["reserved_bytes"].tolist() == [e["args"]["Total Reserved"] for e in raw]
    assert set(tl["device"]) == {-1} and set(tl["device_type"]) == {"cpu"}
    assert (tl["bytes"] < 0).any() and (tl["bytes"] > 0).any()  # frees are negative
    assert set(tl["step"]) == {2, 3}  # the two active steps of wait=1, warmup=1, active=2
    # Total Allocated is the allocator's total after each event: from the first event on,
    # allocated_bytes[i] - allocated_bytes[0] == cumsum(bytes)[i] - bytes[0] ...
    allocated = tl["allocated_bytes"].to_numpy(np.int64)
    running = np.cumsum(tl["bytes"].to_numpy())
    assert (allocated - allocated[0] == running - running[0]).all()
    # (not from zero: what earlier code in the same process still holds is counted in it)


def test_memory_by_op_is_torchs_own_self_cpu_memory(recorded):
    path, by_torch = recorded
    by_op = traces.memory_by_op(_load(path))
    assert _self_bytes(by_op) == by_torch
    assert {"aten::addmm", "aten::mm", "forward", "ProfilerStep*"} <= set(by_torch)
    assert (by_op["self_bytes"] == by_op["alloc_bytes"] - by_op["freed_bytes"]).all()
    assert by_op["count"].sum() == len(traces.memory_timeline(_load(path)))


def test_stored_ddp_traces_match_torchs_key_averages_per_rank_and_cycle():
    """The stored run: 2 DDP ranks (gloo), 2 schedule cycles each, one file per rank and cycle;
    torch's numbers were kept beside them when they were recorded."""
    df = _load(MEMORY / "traces")
    expected = json.loads((MEMORY / "key_averages.json").read_text())["self_cpu_memory_usage"]
    assert sorted(df.attrs["ranks"]) == [0, 1]
    for rank in (0, 1):
        for cycle in (0, 1):
            part = df[(df["rank"] == rank) & (df["cycle"] == cycle)]
            assert _self_bytes(traces.memory_by_op(part)) == expected[str(rank)][str(cycle)]
    tl = traces.memory_timeline(df)
    assert tl.groupby("rank").size().to_dict() == {0: 4 * 87 // 2, 1: 4 * 87 // 2}
    assert tl.columns.tolist() == list(M.TIMELINE_COLUMNS)
    assert tl.dtypes.equals(traces.memory_timeline(traces.empty_table()).dtypes)
    for _, t in tl.groupby(["rank", "device"]):
        assert t["ts_ns"].is_monotonic_increasing
        # within each file (one rank, one cycle) the running sum is the total torch wrote;
        # the second cycle starts from what the steps before it left allocated
        for steps in ((2, 3), (6, 7)):
            c = t[t["step"].isin(steps)]
            allocated = c["allocated_bytes"].to_numpy(np.int64)
            running = np.cumsum(c["bytes"].to_numpy())
            assert (allocated - allocated[0] == running - running[0]).all()
        assert sorted(set(t["step"])) == [2, 3, 6, 7]


def test_peaks_are_the_largest_total_allocated_of_each_step():
    df = _load(MEMORY / "traces")
    peaks = traces.memory_peaks(df)
    assert peaks.columns.tolist() == list(M.PEAK_COLUMNS)
    assert peaks[["rank", "step"]].values.tolist() == [[r, s] for r in (0, 1) for s in (2, 3, 6, 7)]
    # the oracle: the raw JSON's Total Allocated, grouped by the ProfilerStep spans it falls in
    for f in sorted((MEMORY / "traces").glob("*.json.gz")):
        with gzip.open(f, "rt") as fh:
            trace = json.load(fh)
        rank = trace["distributedInfo"]["rank"]
        events = trace["traceEvents"]
        spans = [e for e in events if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")]
        for s in spans:
            step = int(s["name"].split("#")[1])
            inside = [
                e["args"]
                for e in events
                if e.get("name") == "[memory]" and s["ts"] <= e["ts"] < s["ts"] + s["dur"]
            ]
            start = inside[0]["Total Allocated"] - inside[0]["Bytes"]
            peak = max(start, *(a["Total Allocated"] for a in inside))
            row = peaks[(peaks["rank"] == rank) & (peaks["step"] == step)].iloc[0]
            assert (row["start_bytes"], row["peak_bytes"]) == (start, peak)
            assert row["end_bytes"] == inside[-1]["Total Allocated"]
            assert row["growth_bytes"] == peak - start > 0
            assert row["events"] == len(inside)


def test_stored_xpu_trace_keeps_a_memory_event_without_totals():
    """A Kineto XPU trace whose one [memory] event carries only Bytes and Total Reserved."""
    df = _load(FIXTURES / "kineto_xpu-1-of-2.json")
    tl = traces.memory_timeline(df)
    assert len(tl) == 1
    row = tl.iloc[0]
    assert (row["rank"], row["bytes"], row["reserved_bytes"], row["device"]) == (1, 4096, 0, -1)
    assert pd.isna(row["allocated_bytes"]) and row["step"] == 2
    assert row["ts_ns"] == 1_790_000_000_000_000_000 + 1_011_000  # relative ts + base time
    by_op = traces.memory_by_op(df)  # the event lies inside aten::mm (1010.25 to 1030.375 µs)
    assert by_op[["op", "alloc_bytes", "self_bytes", "count"]].values.tolist() == [
        ["aten::mm", 4096, 4096, 1]
    ]
    with pytest.warns(KitWarning, match="no 'Total Allocated'.*running sum of 'Bytes'"):
        peaks = traces.memory_peaks(df)
    assert peaks[["step", "start_bytes", "peak_bytes"]].values.tolist() == [[2, 0, 4096]]


def test_trace_without_memory_events_gives_empty_tables_and_plot_says_how():
    df = _load(FIXTURES / "ddp_cpu_2rank")
    tl = traces.memory_timeline(df)
    assert tl.empty and tl.columns.tolist() == list(M.TIMELINE_COLUMNS)
    assert tl.dtypes.equals(traces.memory_timeline(_load(MEMORY / "traces")).dtypes)
    by_op = traces.memory_by_op(df)
    assert by_op.empty and by_op.columns.tolist() == list(M.BY_OP_COLUMNS)
    peaks = traces.memory_peaks(df)
    assert peaks.empty and peaks.columns.tolist() == list(M.PEAK_COLUMNS)
    with pytest.raises(TraceFormatError) as err:
        traces.plot_memory(df)
    assert str(err.value) == (
        "the trace table has no [memory] events, so there is no memory to plot; record them "
        "with torch.profiler.profile(..., profile_memory=True) and load the new traces"
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_shuffled_rows_give_the_same_tables(seed):
    df = _load(MEMORY / "traces")
    shuffled = df.sample(frac=1.0, random_state=seed)
    assert shuffled.attrs["ranks"] == df.attrs["ranks"]
    pd.testing.assert_frame_equal(traces.memory_by_op(shuffled), traces.memory_by_op(df))
    pd.testing.assert_frame_equal(traces.memory_timeline(shuffled), traces.memory_timeline(df))
    pd.testing.assert_frame_equal(traces.memory_peaks(shuffled), traces.memory_peaks(df))


def test_by_op_rows_are_ordered_by_bytes_then_name():
    by_op = traces.memory_by_op(_load(MEMORY / "traces"))
    keys = list(zip(-by_op["alloc_bytes"], by_op["op"], by_op["device"], strict=True))
    assert keys == sorted(keys) and by_op["op"].is_unique
    assert by_op.iloc[0]["op"] == "aten::mm"  # the backward's matmuls allocate the most


def test_innermost_span_holds_each_event_ends_included():
    # thread 0: A [0, 100] holds B [10, 20] and C [20, 30]; D [40, 50] twice, named 0 and 1
    sg = np.array([0, 0, 0, 0, 0])
    s0 = np.array([0, 10, 20, 40, 40])
    s1 = np.array([100, 20, 30, 50, 50])
    tie = np.array([0, 0, 0, 1, 0])  # the spans of equal times nest by name: 0 outside 1
    pt = np.array([0, 15, 20, 35, 45, 100, 101, 15])
    pg = np.array([0, 0, 0, 0, 0, 0, 0, 1])  # the last point is on another thread
    got = M._innermost(sg, s0, s1, tie, pg, pt)
    assert got.tolist() == [0, 1, 2, 0, 3, 0, -1, -1]


def test_a_trace_file_rewritten_after_loading_is_named(tmp_path):
    """The loader keeps the [memory] events' args as it reads the file: the timeline is the
    loaded table's, whatever became of the file. A table that lost them (its attrs went
    through JSON, as in a parquet file) reads the file again, and names a rewritten or a
    missing one."""
    src = MEMORY / "traces" / "train-0-of-2.json.gz"
    path = tmp_path / "train-0-of-2.json.gz"
    shutil.copy(src, path)
    df = _load(path)
    loaded = traces.memory_timeline(df)
    assert len(loaded) == 87
    back = df.copy()
    back.attrs = json.loads(json.dumps(df.attrs, default=str))  # the kept args: their summary
    back.attrs["ranks"] = {int(r): m for r, m in back.attrs["ranks"].items()}
    pd.testing.assert_frame_equal(traces.memory_timeline(back), loaded)
    with gzip.open(src, "rt") as fh:
        trace = json.load(fh)
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e.get("name") != "[memory]"]
    with gzip.open(path, "wt") as fh:
        json.dump(trace, fh)
    pd.testing.assert_frame_equal(traces.memory_timeline(df), loaded)
    with pytest.warns(KitWarning, match=r"87 of 87 \[memory\] rows .* load the traces again"):
        assert traces.memory_timeline(back).empty
    path.unlink()
    pd.testing.assert_frame_equal(traces.memory_timeline(df), loaded)
    with pytest.raises(TraceFormatError, match="cannot be read now .* load the traces again"):
        traces.memory_timeline(back)


def test_plot_memory_draws_each_rank_with_the_steps_marked():
    df = _load(MEMORY / "traces")
    fig, table = traces.plot_memory(df)
    tl = traces.memory_timeline(df)
    assert len(table) == len(tl)
    assert table["allocated_bytes"].tolist() == tl["allocated_bytes"].astype(int).tolist()
    (ax,) = fig.axes  # host memory only: one panel
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["rank 0", "rank 1"]
    assert ax.get_ylabel() == "host: KiB allocated"
    steps = table.attrs["steps"]
    assert steps["step"].tolist() == [2, 3, 6, 7] and set(steps["rank"]) == {0}
    assert [t.get_text() for t in ax.texts] == ["#2", "#3", "#6", "#7"]
    assert (table["t_ms"] >= 0).all()
    _, one = traces.plot_memory(df, ranks=[1])
    assert set(one["rank"]) == {1}
    with pytest.raises(SpecError, match=r"rank 5 has no \[memory\] events; pick from \[0, 1\]"):
        traces.plot_memory(df, ranks=[5])


@pytest.mark.parametrize("piece", [97, 4096])
def test_memory_events_read_in_small_pieces_are_the_same(monkeypatch, tmp_path, piece):
    """Objects cut by the end of a piece are read whole from the next one."""
    from hpcprof_kit.traces.read import memory_events as E

    path = tmp_path / "train-0-of-2.json"
    with gzip.open(MEMORY / "traces" / "train-0-of-2.json.gz", "rb") as fh:
        path.write_bytes(fh.read())
    E._read.cache_clear()
    whole = E.file_memory_events(str(path))
    E._read.cache_clear()
    monkeypatch.setattr("hpcprof_kit.traces.read.text.READ_BYTES", piece)
    monkeypatch.setattr(E, "_TAIL", 1000)  # a [memory] object of this trace is ~330 bytes
    cut = E.file_memory_events(str(path))
    E._read.cache_clear()
    assert len(whole["ts_ns"]) == 87
    for key, values in whole.items():
        assert cut[key].tolist() == values.tolist(), key


def test_memory_events_in_another_key_order_and_with_nulls(tmp_path):
    """args before the name, a null Total Allocated, a GPU event: read as written."""
    from hpcprof_kit.traces.read import memory_events as E

    path = tmp_path / "other-0-of-1.json"
    path.write_text(
        '{"traceEvents": ['
        '{"args": {"Bytes": 8, "Total Allocated": null, "Device Type": 1, "Device Id": 3},'
        ' "ph": "i", "name": "[memory]", "pid": 1, "tid": 2, "ts": 5.25},'
        '{"ph": "X", "name": "[memory] is not this", "pid": 1, "tid": 2, "ts": 6, "dur": 1},'
        '{"ph": "i", "name": "[memory]", "pid": 1, "tid": 2, "ts": 7,'
        ' "args": {"Bytes": -8, "Total Allocated": 0, "Device Type": 12, "Device Id": 0}}]}'
    )
    got = E.file_memory_events(str(path))
    assert got["ts_ns"].tolist() == [5250, 7000]
    assert got["bytes"].tolist() == [8, -8]
    assert got["has_allocated"].tolist() == [False, True]
    assert got["device"].tolist() == [3, 0]
    assert got["device_type"].tolist() == ["cuda", "xpu"]
    assert got["pid"].tolist() == ["1", "1"] and got["tid"].tolist() == ["2", "2"]


MEMORY_FILES = sorted(
    str(p.relative_to(FIXTURES))
    for p in [*FIXTURES.glob("*/traces/*.json.gz"), *FIXTURES.glob("cuda_h100/*.json.gz"),
              *FIXTURES.glob("gpu_pathologies/*/traces/*.json.gz"), FIXTURES / "kineto_xpu-1-of-2.json"]
)  # fmt: skip


@pytest.mark.parametrize("scanner", ["on", "off"])
def test_the_loader_keeps_the_memory_events_as_the_file_has_them(monkeypatch, scanner):
    """Every recorded trace with [memory] events (CPU, H100, the GPU pathologies, XPU): the
    columns the loader keeps as it reads each file, with the compiled scanner or without,
    are the ones reading the file again gives."""
    monkeypatch.setenv("HPCPROF_SCANNER", scanner)
    assert len(MEMORY_FILES) >= 20
    for name in MEMORY_FILES:
        path = str(FIXTURES / name)
        kept = of_kept(stream.read_chrome(Path(path)).args)
        again = file_memory_events(path)
        assert kept.keys() == again.keys(), name
        for col, values in again.items():
            assert kept[col].dtype == values.dtype, (name, col)
            np.testing.assert_array_equal(kept[col], values, err_msg=f"{name}: {col}")


def test_the_memory_pane_and_the_rules_read_no_trace_file_again(monkeypatch):
    """The report (its memory pane, the allocator rules) and the memory timeline give the same
    answers with every read of a trace file for [memory] events refused."""
    from hpcprof_kit.traces.read import memory_events

    df = _load(FIXTURES / "gpu_pathologies" / "allocator_churn" / "traces")
    old = {
        r: {k: v for k, v in m.items() if k != "event_args"} for r, m in df.attrs["ranks"].items()
    }
    searched = df.copy()
    searched.attrs["ranks"] = old
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        before = traces.report(searched)
        timeline = traces.memory_timeline(searched)

    def refused(path, *_):
        raise AssertionError(f"{path} was read again for its [memory] events")

    monkeypatch.setattr(memory_events, "file_memory_events", refused)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        after = traces.report(df)
        pd.testing.assert_frame_equal(traces.memory_timeline(df), timeline)
    assert "allocator_churn" in {f["kind"] for f in after.findings}
    assert json.dumps(after.findings, default=str) == json.dumps(before.findings, default=str)
    mine, theirs = after.panes["memory"], before.panes["memory"]
    assert mine.tables.keys() == theirs.tables.keys() and mine.tables
    for name, table in mine.tables.items():
        pd.testing.assert_frame_equal(table, theirs.tables[name])
