"""Every real third-party trace in ../shared/traces loads: ranks, counts by category, tracks,
steps and exact integer ns, checked against the test's own reading of the JSON."""

from __future__ import annotations

import gzip
import json
import shutil
import warnings
from collections import Counter
from decimal import Decimal

import pandas as pd
import pytest

from hpcprof_kit.errors import TraceFormatError
from hpcprof_kit.traces import load
from hpcprof_kit.traces.read import cache as trace_cache
from hpcprof_kit.traces.table.schema import check_table

pytestmark = pytest.mark.shared_traces

# file -> (rank, world size, where the rank came from, a warning about the rank expected?)
EXPECTED = {
    "cuda_rank0_of_128.json.gz": (0, 128, "distributedInfo", False),
    "cuda_rank1_of_128.json.gz": (1, 128, "distributedInfo", False),
    "cpu_rank34_of_300.json.gz": (34, 300, "distributedInfo", False),
    "cuda_1rank_ns_resolution.json.gz": (0, 1, "distributedInfo", False),
    "rocm_mi250_1rank.json.gz": (0, None, "default", True),
    "cpu_no_distributed_info.json.gz": (0, None, "default", True),
}
# Kineto category -> the track its events must land on (kernels: gpu or comm)
TRACK_OF_CATEGORY = {
    "kernel": {"gpu", "comm"},
    "gpu_memcpy": {"memcpy"},
    "gpu_memset": {"memset"},
    "cuda_runtime": {"runtime"},
    "gpu_user_annotation": {"gpu_annotation"},
    "cpu_op": {"cpu", "comm"},
    "user_annotation": {"cpu", "comm"},
}


def _raw(path):
    with gzip.open(path, "rt") as fh:
        doc = json.load(fh, parse_float=Decimal)
    return doc, [e for e in doc["traceEvents"] if e.get("ph") in ("X", "i")]


def test_folder_holds_the_expected_files(shared_traces):
    found = {p.name for p in (shared_traces / "hta").glob("*.json.gz")}
    assert set(EXPECTED) <= found


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_trace_loads_with_its_rank_counts_and_tracks(
    shared_traces, name, tmp_path, monkeypatch
):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    path = shared_traces / "hta" / name
    rank, world, source, warns = EXPECTED[name]
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        df = load(path)
    check_table(df)
    assert list(df.attrs["ranks"]) == [rank]
    meta = df.attrs["ranks"][rank]
    assert (meta["world_size"], meta["rank_source"], meta["format"]) == (world, source, "kineto")
    assert any("taken as rank 0" in str(w.message) for w in record) == warns
    assert set(df["rank"]) == {rank}

    doc, events = _raw(path)
    raw_counts = Counter(e.get("cat", "") for e in events)
    assert df.cat.astype(str).value_counts().to_dict() == dict(raw_counts)

    # every category lands on its track; instants on "instant"
    is_instant = df.track == "instant"
    assert is_instant.sum() == sum(1 for e in events if e["ph"] == "i")
    for cat, tracks in TRACK_OF_CATEGORY.items():
        assert set(df.track[(df.cat == cat) & ~is_instant]) <= tracks, cat
    nccl = df.name.astype(str).str.startswith(("ncclKernel_", "ncclDevKernel_"))
    assert set(df.track[nccl]) <= {"comm"}

    # exact integer ns, compared with the test's own decimal arithmetic
    base = int(doc.get("baseTimeNanoseconds", 0))
    expected_ts = sorted(base + int((Decimal(e["ts"]) * 1000).to_integral_value()) for e in events)
    assert sorted(df.ts_ns.tolist()) == expected_ts
    assert int(df.dur_ns.sum()) == sum(
        int((Decimal(e.get("dur", 0)) * 1000).to_integral_value()) for e in events
    )

    # every trace has ProfilerStep spans; events inside them carry the step number
    step_names = {n for n in df.name.astype(str) if n.startswith("ProfilerStep#")}
    assert step_names and set(df.step) - {-1} <= {int(n.split("#")[1]) for n in step_names}
    device = df.track.isin(["gpu", "comm", "memcpy", "memset"]) & (df.device >= 0)
    if device.any():
        assert (df.step[device] >= 0).mean() > 0.4

    # the second load comes from the columnar cache (the user's cache folder when the data
    # folder is read-only) and gives the same table
    assert trace_cache.read(path, trace_cache.cache_key(path, None)) is not None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        again = load(path)
    pd.testing.assert_frame_equal(again, df)
    assert again.attrs["ranks"][rank]["world_size"] == world


def test_ns_resolution_trace_keeps_its_decimals(shared_traces):
    """Absolute epoch µs with decimals (1.7e15) cannot pass through float64 exactly."""
    path = shared_traces / "hta" / "cuda_1rank_ns_resolution.json.gz"
    df = load(path, cache=False)
    _doc, events = _raw(path)
    fractional = [
        e
        for e in events
        if Decimal(e["ts"]) % 1 not in (0, Decimal("0.5"), Decimal("0.25"), Decimal("0.75"))
    ]
    assert fractional, "the trace has ts values float64 would round"
    exact = {int((Decimal(e["ts"]) * 1000).to_integral_value()) for e in fractional}
    assert exact <= set(df.ts_ns.tolist())


def test_two_ranks_of_one_job_load_together(shared_traces, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    df = load(str(shared_traces / "hta" / "cuda_rank*_of_128.json.gz"), workers=2)
    check_table(df)
    assert sorted(df.attrs["ranks"]) == [0, 1]
    assert {m["world_size"] for m in df.attrs["ranks"].values()} == {128}
    per_rank = df.groupby("rank").size().to_dict()
    assert per_rank == {
        r: len(_raw(shared_traces / "hta" / f"cuda_rank{r}_of_128.json.gz")[1]) for r in (0, 1)
    }


def test_whole_folder_has_four_files_claiming_rank_0(shared_traces, tmp_path):
    folder = tmp_path / "copy"
    folder.mkdir()
    for name in ("cuda_rank0_of_128.json.gz", "cuda_1rank_ns_resolution.json.gz"):
        shutil.copy(shared_traces / "hta" / name, folder / name)
    with pytest.raises(
        TraceFormatError, match="two files claim rank 0: .*cuda_1rank.* and .*cuda_rank0"
    ):
        load(folder, cache=False, workers=1)


def test_ranks_of_two_runs_with_other_world_sizes_are_refused_naming_the_sizes(shared_traces):
    # rank 34 of a 300-rank CPU job and rank 1 of a 128-rank CUDA job: two ranks, two runs
    files = [shared_traces / "hta" / n for n in ("cpu_rank34_of_300.json.gz",
                                                 "cuda_rank1_of_128.json.gz")]  # fmt: skip
    with pytest.raises(TraceFormatError) as refused:
        load(files, cache=False, workers=1)
    assert str(refused.value) == (
        f"{files[0]} and {files[1]} come from different runs: they record different world sizes "
        "(300 against 128); load each run on its own (a folder or a glob per run)"
    )
    # the --mpi path refuses them too, from the ranks' summaries
    from hpcprof_kit.traces.view.summary import combine, summarise_rank

    summaries = [summarise_rank(load(f, cache=False)) for f in files]
    with pytest.raises(TraceFormatError, match=r"different world sizes \(300 against 128\)"):
        combine(summaries)
