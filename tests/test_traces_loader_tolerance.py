"""Malformed traces seen in the wild: each loads with a warning, or fails with the kit's error."""

from __future__ import annotations

import gzip
import json
import zlib
from pathlib import Path

import pytest

from hpcprof_kit.errors import TraceFormatError
from hpcprof_kit.traces import load
from hpcprof_kit.traces.table.schema import check_table

FIXTURES = Path(__file__).parent / "fixtures" / "traces"


def _events_of(real_trace: Path) -> list[dict]:
    with gzip.open(real_trace, "rt") as fh:
        return json.load(fh)["traceEvents"]


def _write_with_offsets(events: list[dict], path: Path) -> tuple[bytes, list[int]]:
    """A Kineto-like file; returns its bytes and the end offset of every event."""
    text = b'{"schemaVersion": 1, "distributedInfo": {"rank": 0, "world_size": 128},\n"traceEvents": [\n'
    ends = []
    for i, ev in enumerate(events):
        text += (b",\n" if i else b"") + json.dumps(ev).encode()
        ends.append(len(text))
    text += b'\n], "traceName": "t"}'
    path.write_bytes(text)
    return text, ends


def _complete_rows(events: list[dict], ends: list[int], cut: int) -> int:
    return sum(
        1 for ev, end in zip(events, ends, strict=True) if end <= cut and ev.get("ph") in ("X", "i")
    )


def test_truncated_copy_keeps_every_complete_event_and_says_how_much_was_lost(
    shared_traces, tmp_path
):
    events = _events_of(shared_traces / "hta" / "cuda_rank0_of_128.json.gz")
    full, ends = _write_with_offsets(events, tmp_path / "whole.json")
    cut = ends[3000] - 25  # in the middle of event 3000
    cut_path = tmp_path / "cut-0-of-128.json"
    cut_path.write_bytes(full[:cut])
    with pytest.warns(UserWarning, match="file cut short") as record:
        df = load(cut_path, cache=False)
    check_table(df)
    expected = _complete_rows(events, ends, cut)
    assert expected > 2900 and len(df) == expected
    lost = cut - ends[2999] - 2  # the partial event after the last ",\n"
    assert any(f"{lost} bytes" in str(w.message) for w in record)
    assert len(load(tmp_path / "whole.json", cache=False)) == _complete_rows(
        events, ends, len(full)
    )


def test_truncated_gzip_keeps_every_complete_event(shared_traces, tmp_path):
    events = _events_of(shared_traces / "hta" / "cuda_rank1_of_128.json.gz")
    full, ends = _write_with_offsets(events, tmp_path / "whole.json")
    packed = gzip.compress(full)
    cut_path = tmp_path / "cut-1-of-128.json.gz"
    cut_path.write_bytes(packed[: len(packed) // 2])
    recovered = len(zlib.decompressobj(zlib.MAX_WBITS | 16).decompress(packed[: len(packed) // 2]))
    with pytest.warns(UserWarning, match="cut short"):
        df = load(cut_path, cache=False)
    assert len(df) == _complete_rows(events, ends, recovered) > 1000


def test_raw_control_characters_are_repaired(recwarn):
    df = load(FIXTURES / "control_chars.json", cache=False)
    assert sorted(df.name.astype(str)) == ["aten:: odd name", "tab here"]
    assert [int(v) for v in df.ts_ns] == [10_500, 12_000]
    assert any("repaired invalid JSON" in str(w.message) for w in recwarn)


def test_bytes_that_are_not_utf8_are_replaced_not_a_crash(recwarn, tmp_path):
    # one byte 0xff inside a name (a truncated multi-byte character in a hand-edited trace)
    path = tmp_path / "latin.json"
    path.write_bytes(
        b'{"traceEvents": [{"ph": "X", "name": "a\xffb", "ts": 1, "dur": 2},\n'
        b'{"ph": "X", "name": "ok", "ts": 3, "dur": 1}]}'
    )
    df = load(path, cache=False)
    assert list(df.name.astype(str)) == ["a\ufffdb", "ok"]
    assert [int(v) for v in df.ts_ns] == [1000, 3000]
    assert any("not UTF-8" in str(w.message) for w in recwarn)


def test_bare_na_becomes_missing(recwarn):
    df = load(FIXTURES / "bare_na.json", cache=False).set_index("name")
    assert df.loc["aten::add", "dur_ns"] == 0 and df.loc["aten::add", "ext_id"] == -1
    assert df.loc["aten::mul", "dur_ns"] == 3000
    assert any("bare N/A" in str(w.message) for w in recwarn)


def test_trailing_empty_event_is_skipped(recwarn):
    df = load(FIXTURES / "trailing_empty.json", cache=False)
    assert sorted(df.name.astype(str)) == ["aten::add", "aten::mul"]
    assert any("skipped 1 empty {} events" in str(w.message) for w in recwarn)


def test_string_pids_and_tids_are_text_categories(recwarn):
    df = load(FIXTURES / "string_pids.json", cache=False)
    check_table(df)
    assert sorted(df.pid.astype(str)) == ["", "7", "Spans"]
    assert sorted(df.tid.astype(str)) == ["", "7", "PyTorch Profiler"]
    assert df.set_index("name").loc["Record Window End", "track"] == "instant"


def test_integers_wider_than_int64_do_not_crash(recwarn):
    df = load(FIXTURES / "wide_ints.json", cache=False).set_index("name")
    assert df.loc["record_param_comms", "ext_id"] == 5  # beside a 128-bit Comms Id
    kernel = df.loc["ncclDevKernel_AllReduce_Sum_f32_RING_LL"]
    assert (kernel["corr"], kernel["track"], kernel["stream"]) == (-1, "comm", 7)
    assert any("did not fit in int64" in str(w.message) for w in recwarn)


def test_not_a_trace_names_the_file_and_what_was_expected():
    with pytest.raises(
        TraceFormatError, match=r"not_a_trace\.json: not a trace file: expected .*traceEvents"
    ):
        load(FIXTURES / "not_a_trace.json", cache=False)


def test_json_without_trace_events_is_refused(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"lr": 0.1, "epochs": 3}))
    with pytest.raises(TraceFormatError, match=r"config\.json: not a trace file: no 'traceEvents'"):
        load(path, cache=False)


def test_text_times_in_an_epoch_trace_do_not_crash(tmp_path):
    # epoch µs with ns decimals are read as text; a ts written as a string must not stop that
    path = tmp_path / "odd-0-of-1.json"
    events = [
        '{"ph": "X", "name": "a", "pid": 1, "tid": 1, "ts": 1712195495519695.812, "dur": 1}',
        '{"ph": "X", "name": "b", "pid": 1, "tid": 1, "ts": "1712195495519696.5", "dur": 1}',
        '{"ph": "X", "name": "c", "pid": 1, "tid": 1, "ts": "soon", "dur": 1}',
    ]
    path.write_text('{"traceEvents": [' + ",\n".join(events) + "]}")
    with pytest.warns(UserWarning, match=r"#2: ts is 'soon', not a number"):
        df = load(path, cache=False).set_index("name")
    assert df.loc["a", "ts_ns"] == 1_712_195_495_519_695_812
    assert df.loc["b", "ts_ns"] == 1_712_195_495_519_696_500
    assert "c" not in df.index  # a time that is no number is skipped and said, never made 0
