"""The report's work done once over all ranks, not once per rank (issue 47: the report of 256
ranks within 1.5x ``load``): each shortcut gives what the plain definition gives.

- the innermost op running at a moment, found by a table that grows only as far as needed;
- the table's ``[memory]`` rows matched to their files' events by sorting, keys repeated;
- the step breakdown of ranks with device events computed in one pass, each rank in a block
  of time of its own, beside CPU-only ranks;
- copies' and collectives' sizes looked up by (rank, correlation) for many rows at once.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hpcprof_kit import traces
from hpcprof_kit.traces.analyses.breakdown import step_breakdown
from hpcprof_kit.traces.read.memory_events import match_rows
from hpcprof_kit.traces.view.idle_host import _innermost
from hpcprof_kit.traces.view.signals import _CorrArgs

FIXTURES = Path(__file__).parent / "fixtures"


def innermost_by_definition(o_ts, o_end, at) -> list[int]:
    """The last op, in start order, that began at or before the moment and has not ended."""
    out = []
    for t in at.tolist():
        running = [i for i in range(o_ts.size) if o_ts[i] <= t < o_end[i]]
        out.append(max(running) if running else -1)
    return out


@pytest.mark.parametrize("seed", range(40))
def test_the_innermost_op_is_the_last_begun_still_running(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 50))
    o_ts = np.sort(rng.integers(0, 200, n))
    # nested short ops, some long ones, some that end before the next starts
    o_end = o_ts + rng.choice([1, 3, 20, 150], n) * rng.integers(0, 3, n)
    at = rng.integers(-10, 400, 60)
    assert _innermost(o_ts, o_end, at).tolist() == innermost_by_definition(o_ts, o_end, at)


def _events(rows: list[tuple]) -> pd.DataFrame:
    rank, cycle, pid, tid, ts, nbytes = zip(*rows, strict=True)
    return pd.DataFrame({"rank": np.array(rank, np.int32), "cycle": np.array(cycle, np.int16),
                         "pid": np.array(pid, object), "tid": np.array(tid, object),
                         "ts_ns": np.array(ts, np.int64), "bytes": np.array(nbytes, np.int64),
                         "order": np.arange(len(rows), dtype=np.int64)})  # fmt: skip


def test_memory_rows_match_their_events_once_each_in_file_order_with_their_step():
    # two events of one key (an alloc and a free in the same ns) and the table holds both rows;
    # a key the table holds once keeps the first event; an event the table lacks is left out
    events = _events([(0, 0, "1", "1", 100, 64), (0, 0, "1", "1", 100, -64),
                      (0, 0, "1", "2", 100, 8), (0, 0, "1", "2", 100, 9),
                      (1, 0, "7", "7", 50, 16), (1, 1, "7", "7", 50, 32),
                      (1, 0, "7", "7", 60, 4)])  # fmt: skip
    rows = pd.DataFrame({"rank": [0, 0, 0, 1, 1], "cycle": [0, 0, 0, 1, 0],
                         "pid": ["1", "1", "1", "7", "7"], "tid": ["1", "1", "2", "7", "7"],
                         "ts_ns": [100, 100, 100, 50, 50], "step": [3, 3, 4, 9, 8]})  # fmt: skip
    got = match_rows(rows, events)
    assert got["bytes"].tolist() == [64, -64, 8, 16, 32]
    assert got["step"].tolist() == [3, 3, 4, 8, 9]
    assert got["cycle"].tolist() == [0, 0, 0, 0, 1]


def test_a_memory_row_without_its_event_is_left_out_with_a_warning():
    events = _events([(0, 0, "1", "1", 100, 64)])
    rows = pd.DataFrame({"rank": [0, 0], "cycle": [0, 0], "pid": ["1", "1"], "tid": ["1", "1"],
                         "ts_ns": [100, 200], "step": [1, 2]})  # fmt: skip
    with pytest.warns(UserWarning, match="1 of 2 \\[memory\\] rows"):
        got = match_rows(rows, events)
    assert got["bytes"].tolist() == [64]


def test_the_breakdown_of_a_run_is_each_ranks_own_breakdown():
    """Device ranks of two recorded runs and CPU-only ranks in one table: each rank's rows of
    the run's breakdown are those of the breakdown of its own rows alone."""
    gpu = traces.load(FIXTURES / "traces" / "gpu_pathologies" / "straggler" / "traces", cache=False)
    cpu = traces.load(FIXTURES / "traces" / "ddp_cpu_2rank", cache=False)
    cpu = cpu.assign(rank=cpu["rank"] + 100)
    both = pd.concat([gpu, cpu], ignore_index=True)
    for col in ("track", "name", "cat"):
        both[col] = both[col].astype("category")
    whole = step_breakdown(both)
    assert set(whole["kind"]) == {"device", "cpu"}
    for rank in sorted(set(both["rank"])):
        own = step_breakdown(both[both["rank"] == rank]).reset_index(drop=True)
        pd.testing.assert_frame_equal(
            whole[whole["rank"] == rank].reset_index(drop=True), own, check_dtype=False
        )


def test_sizes_by_correlation_take_the_last_pair_and_none_elsewhere():
    args = _CorrArgs([0, 0, 1], [5, 5, 5], [10, 20, 30], ["allreduce", "allgather", "x"],
                     [2, 4, 8])  # fmt: skip
    rank, corr = np.array([0, 1, 1, 0]), np.array([5, 5, 6, -1])
    assert args.nbytes(rank, corr).tolist() == [20, 30, -1, -1]
    pos = args.at(rank, corr)
    assert [args.coll[p] if p >= 0 else None for p in pos] == ["allgather", "x", None, None]
    assert not _CorrArgs([], [], [], [], []) and args
