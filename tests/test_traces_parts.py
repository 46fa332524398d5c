"""Ranks joined into one table, parts stored and read back, files shared out among processes,
and the parallel load equal to the one-process load (real handwritten fixtures)."""

from __future__ import annotations

import io
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

from hpcprof_kit.errors import TraceFormatError
from hpcprof_kit.traces import load
from hpcprof_kit.traces.read.parts import Part, join, read, save
from hpcprof_kit.traces.table import loader
from hpcprof_kit.traces.table.loader import lanes
from hpcprof_kit.traces.table.schema import check_table

FIXTURES = Path(__file__).parent / "fixtures" / "traces"


def _part(rank: int, names: list[str], labels: list[str]) -> Part:
    codes = np.array([labels.index(n) for n in names], dtype=np.int32)
    ts = np.arange(len(names), dtype=np.int64) * 10 + rank * 1000
    return Part({"name": codes, "ts_ns": ts}, {"name": labels}, rank, {"events": len(names)})


def test_join_unites_labels_and_keeps_every_row_in_order():
    one = _part(1, ["mm", "add", "mm"], ["mm", "add"])
    zero = _part(0, ["relu", "mm"], ["relu", "unused", "mm"])
    df = join([one, zero])
    assert list(df["name"]) == ["mm", "add", "mm", "relu", "mm"]
    assert list(df["name"].cat.categories) == ["mm", "add", "relu", "unused"]
    assert list(df["ts_ns"]) == [1000, 1010, 1020, 0, 10]
    assert list(df.attrs["ranks"]) == [0, 1]  # sorted, whatever the file order


def test_one_part_becomes_a_table_without_copying_its_columns():
    part = _part(0, ["mm", "add"], ["mm", "add"])
    df = part.frame()
    assert np.shares_memory(df["ts_ns"].to_numpy(), part.columns["ts_ns"])
    assert list(df["name"]) == ["mm", "add"]


def test_a_stored_part_reads_back_equal():
    part = _part(3, ["b", "a", "b"], ["a", "b"])
    buf = io.BytesIO()
    save(buf, part)
    buf.seek(0)
    back = read(buf)
    assert (back.rank, back.meta, back.labels) == (3, {"events": 3}, {"name": ["a", "b"]})
    assert back.frame().equals(part.frame())


@pytest.mark.parametrize("names", [["b", "a", "b"], []])
def test_a_stored_part_maps_back_equal_from_a_file(tmp_path, names):
    part = _part(2, names, ["a", "b"])
    place = tmp_path / "part.npz"
    with place.open("wb") as fh:
        save(fh, part)
    back = read(place, mapped=True)
    assert back.frame().equals(part.frame())
    mapped = [c for c, values in back.columns.items() if isinstance(values, np.memmap)]
    assert mapped == (["name", "ts_ns"] if names else [])  # an empty column is just read
    assert join([back, part])["ts_ns"].tolist() == 2 * part.columns["ts_ns"].tolist()


def test_lanes_put_the_largest_file_here_and_balance_the_rest(tmp_path):
    sizes = [50, 10, 40, 30, 20]
    files = []
    for rank, size in enumerate(sizes):
        f = tmp_path / f"t-{rank}-of-5.json"
        f.write_bytes(b" " * size)
        files.append(f)
    mine, theirs = lanes(files, 2)
    assert mine == [0, 4, 1]  # 50 + 20 + 10 = 80 bytes here
    assert theirs == [2, 3]  # 40 + 30 = 70 bytes to the worker
    mine, theirs = lanes(files, 5)
    assert mine == [0] and sorted(theirs) == [1, 2, 3, 4]


@pytest.mark.parametrize("workers", [2, 3])
def test_parallel_load_equals_the_one_process_load(tmp_path, workers):
    for rank, fixture in enumerate(["string_pids.json", "trailing_empty.json", "bare_na.json"]):
        shutil.copy(FIXTURES / fixture, tmp_path / f"trace-{rank}-of-3.json")
    with warnings.catch_warnings(record=True) as one_process:
        warnings.simplefilter("always")
        expected = load(tmp_path, workers=1, cache=False)
    with warnings.catch_warnings(record=True) as in_parallel:
        warnings.simplefilter("always")
        got = load(tmp_path, workers=workers, cache=False)
    # the defects the fixtures carry are reported the same way, file by file
    assert [str(w.message) for w in in_parallel] == [str(w.message) for w in one_process]
    assert any("bare_na" in str(w.message) or "N/A" in str(w.message) for w in in_parallel)
    check_table(got)
    assert got.equals(expected)
    assert got.attrs["ranks"] == expected.attrs["ranks"]
    assert sorted(got.attrs["ranks"]) == [0, 1, 2]


@pytest.mark.parametrize("bad_rank", [0, 1])  # the file read here, or the one in a worker
def test_a_bad_file_in_a_parallel_load_names_the_file(tmp_path, bad_rank):
    for rank in (0, 1):
        fixture = "not_a_trace.json" if rank == bad_rank else "string_pids.json"
        shutil.copy(FIXTURES / fixture, tmp_path / f"trace-{rank}-of-2.json")
    # make the bad one the largest, so it is the one this process parses when bad_rank is 0
    bad = tmp_path / f"trace-{bad_rank}-of-2.json"
    bad.write_bytes(bad.read_bytes() + b" " * 100_000 * (bad_rank == 0))
    with pytest.raises(TraceFormatError, match=f"trace-{bad_rank}-of-2.json"):
        load(tmp_path, workers=2, cache=False)


def test_parallel_load_fills_the_cache_and_the_reload_parses_nothing(tmp_path, monkeypatch):
    for rank in (0, 1):
        shutil.copy(FIXTURES / "string_pids.json", tmp_path / f"trace-{rank}-of-2.json")
    monkeypatch.setenv("HPCPROF_TRACE_CACHE_DIR", str(tmp_path / "xdg" / "hpcprof_kit" / "traces"))
    first = load(tmp_path, workers=2)
    copies = sorted(p.name for p in (tmp_path / "xdg" / "hpcprof_kit" / "traces").glob("*.npz"))
    assert [c.split(".json.")[0] for c in copies] == ["trace-0-of-2", "trace-1-of-2"]

    def no_parse(path, comm_patterns):
        raise AssertionError(f"{path.name} was parsed again")

    monkeypatch.setattr(loader, "_parse", no_parse)  # workers would inherit it too
    again = load(tmp_path, workers=2)
    assert again.equals(first) and again.attrs["ranks"] == first.attrs["ranks"]


def test_parallel_load_with_spawned_workers_as_on_macos(tmp_path, monkeypatch):
    """macOS spawns workers instead of forking: they import the loader anew."""
    import multiprocessing

    for rank in (0, 1):
        shutil.copy(FIXTURES / "kineto_xpu-1-of-2.json", tmp_path / f"t-{rank}-of-2.json")
        text = (tmp_path / f"t-{rank}-of-2.json").read_text()
        (tmp_path / f"t-{rank}-of-2.json").write_text(text.replace('"rank": 1', f'"rank": {rank}'))
    expected = load(tmp_path, workers=1, cache=False)
    monkeypatch.setattr(loader, "_fork", lambda: multiprocessing.get_context("spawn"))
    got = load(tmp_path, workers=2, cache=False)
    assert got.equals(expected) and sorted(got.attrs["ranks"]) == [0, 1]
