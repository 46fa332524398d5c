"""merge_to_chrome: one Perfetto file, one pid range per rank, clocks lined up at step starts."""

from __future__ import annotations

import gzip
import json

import pytest

from hpcprof_kit.errors import TraceFormatError
from hpcprof_kit.traces import load, merge_to_chrome

pytestmark = pytest.mark.shared_traces


@pytest.fixture(scope="module")
def two_ranks(shared_traces):
    return load(str(shared_traces / "hta" / "cuda_rank*_of_128.json.gz"), cache=False, workers=1)


def _read(path):
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as fh:
        return json.load(fh)


def test_each_rank_gets_its_own_pid_range_and_names(two_ranks, tmp_path):
    out = merge_to_chrome(two_ranks, tmp_path / "merged.json.gz")
    doc = _read(out)
    events = [e for e in doc["traceEvents"] if e["ph"] in ("X", "i")]
    assert len(events) == len(two_ranks)
    for rank in (0, 1):
        mine = [e for e in events if e["args"]["rank"] == rank]
        assert len(mine) == int((two_ranks["rank"] == rank).sum())
        assert {e["pid"] // 1000 for e in mine} == {rank}
    names = {
        e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e.get("name") == "process_name"
    }
    assert names[0].startswith("rank 0: ") and names[1000].startswith("rank 1: ")
    # durations survive to the ns (µs with three decimals)
    total_ns = sum(round(e.get("dur", 0) * 1000) for e in events)
    assert total_ns == int(two_ranks.dur_ns.sum())


def test_ranks_line_up_at_their_first_profiler_step(two_ranks, tmp_path):
    doc = _read(merge_to_chrome(two_ranks, tmp_path / "m.json"))
    first = {}
    for e in doc["traceEvents"]:
        if e.get("name", "").startswith("ProfilerStep#"):
            r = e["args"]["rank"]
            first[r] = min(first.get(r, float("inf")), e["ts"])
    assert first[0] == first[1]
    recorded = (
        two_ranks[two_ranks.name.astype(str).str.startswith("ProfilerStep#")]
        .groupby("rank")
        .ts_ns.min()
    )
    assert doc["hpcprofRankOffsetsNs"]["1"] == int(recorded.min() - recorded[1])


def test_absolute_keeps_the_recorded_clocks(two_ranks, tmp_path):
    doc = _read(merge_to_chrome(two_ranks, tmp_path / "abs.json", align="absolute"))
    xs = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    origin = doc["hpcprofOriginNs"]
    assert origin == int(two_ranks.ts_ns.min())
    first = min(xs, key=lambda e: e["ts"])
    assert first["ts"] == 0.0
    with pytest.raises(TraceFormatError, match="align='wall' is not one of"):
        merge_to_chrome(two_ranks, tmp_path / "x.json", align="wall")
