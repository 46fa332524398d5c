"""The columnar cache: a second load skips parsing, a changed file or folder rules apply."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pandas as pd
import pytest

from hpcprof_kit.errors import SpecError
from hpcprof_kit.traces import load
from hpcprof_kit.traces.read import cache as trace_cache
from hpcprof_kit.traces.read import parts
from hpcprof_kit.traces.read import stream as trace_stream

FIXTURES = Path(__file__).parent / "fixtures" / "traces"


@pytest.fixture
def trace(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("HPCPROF_TRACE_CACHE_DIR", raising=False)  # the suite's own folder
    folder = tmp_path / "traces"
    folder.mkdir()
    shutil.copy(FIXTURES / "kineto_xpu-1-of-2.json", folder / "t-1-of-2.json")
    return folder / "t-1-of-2.json"


def _no_parsing(monkeypatch):
    def refuse(path):
        raise AssertionError(f"parsed {path} although a cached copy exists")

    monkeypatch.setattr(trace_stream, "read_chrome", refuse)


def _mine(tmp_path) -> list[Path]:
    """The copies in the user's cache folder (the fixture's XDG_CACHE_HOME)."""
    return sorted((tmp_path / "xdg" / "hpcprof_kit" / "traces").glob("t-1-of-2.json.*.npz"))


def test_second_load_comes_from_the_users_cache_folder_not_the_traces_folder(
    trace, tmp_path, monkeypatch
):
    first = load(trace)
    assert len(_mine(tmp_path)) == 1
    assert sorted(p.name for p in trace.parent.iterdir()) == ["t-1-of-2.json"]  # nothing added
    _no_parsing(monkeypatch)
    second = load(trace)
    pd.testing.assert_frame_equal(second, first)
    assert second.attrs["ranks"] == first.attrs["ranks"]


def test_a_changed_file_is_parsed_again(trace, monkeypatch):
    load(trace)
    text = trace.read_text().replace('"name": "gemm_kernel"', '"name": "gemm_kernel_v2"')
    trace.write_text(text)
    df = load(trace)
    assert "gemm_kernel_v2" in set(df.name.astype(str))


def test_other_comm_patterns_use_another_copy(trace):
    assert load(trace).set_index("name").loc["gemm_kernel", "track"] == "gpu"
    mine = load(trace, comm_patterns=[("mine", "^gemm")])
    assert mine.set_index("name").loc["gemm_kernel", "track"] == "comm"


def test_read_only_folder_uses_the_user_cache_folder(trace, tmp_path, monkeypatch):
    trace.parent.chmod(stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP)
    try:
        first = load(trace)
        assert not (trace.parent / ".hpcprof-cache").exists()
        assert (
            len(list((tmp_path / "xdg" / "hpcprof_kit" / "traces").glob("t-1-of-2.json.*.npz")))
            == 1
        )
        _no_parsing(monkeypatch)
        pd.testing.assert_frame_equal(load(trace), first)
    finally:
        trace.parent.chmod(0o755)


def test_nowhere_writable_means_no_cache_and_no_error(trace, tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would go")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    trace.parent.chmod(0o555)
    try:
        df = load(trace)
        assert len(df) == 9
        key = trace_cache.cache_key(trace, None)
        assert trace_cache.read(trace, key) is None
    finally:
        trace.parent.chmod(0o755)


def test_the_copy_goes_beside_the_traces_only_when_asked(trace, tmp_path, monkeypatch):
    monkeypatch.setenv("HPCPROF_TRACE_CACHE", "beside")
    first = load(trace)
    assert len(list((trace.parent / ".hpcprof-cache").glob("t-1-of-2.json.*.npz"))) == 1
    assert _mine(tmp_path) == []
    _no_parsing(monkeypatch)
    pd.testing.assert_frame_equal(load(trace), first)


def test_an_unknown_cache_place_is_refused_before_anything_is_read(trace, monkeypatch):
    monkeypatch.setenv("HPCPROF_TRACE_CACHE", "next-to")
    assert len(load(trace, cache=False)) == 9  # without a cache, the place is never asked
    _no_parsing(monkeypatch)
    with pytest.raises(SpecError) as refused:
        load(trace)
    assert str(refused.value) == (
        "HPCPROF_TRACE_CACHE='next-to' is not a place for the trace cache; set it to 'home' (the "
        "user's cache folder, the default) or 'beside' (.hpcprof-cache beside the traces), or "
        "unset it"
    )


def test_a_damaged_copy_is_a_miss(trace, tmp_path):
    first = load(trace)
    (copy,) = _mine(tmp_path)
    copy.write_bytes(b"PK\x03\x04 not really a zip")
    pd.testing.assert_frame_equal(load(trace), first)
    assert os.path.getsize(copy) > 100  # rewritten by the second load


def test_parallel_load_falls_back_when_shared_memory_is_full(tmp_path, monkeypatch):
    """Workers hand tables back through a file; a file that cannot be written is no failure."""
    for rank in (0, 1):  # no distributedInfo in this fixture: the rank comes from the name
        shutil.copy(FIXTURES / "string_pids.json", tmp_path / f"trace-{rank}-of-2.json")
    expected = load(tmp_path, workers=1, cache=False)

    def full_disk(fh, part):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(parts, "save", full_disk)  # inherited by forked workers
    got = load(tmp_path, workers=2, cache=False)
    assert got.equals(expected)
    assert sorted(got.attrs["ranks"]) == [0, 1]
