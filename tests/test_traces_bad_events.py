"""Bad events: each is left out with its index and the reason, never loaded as a wrong number,
never blamed on a cut file; a trace with no event at all fails the CLI in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcprof_kit.cli import main
from hpcprof_kit.traces import load

GOOD = '{"ph": "X", "cat": "cpu_op", "name": "%s", "pid": 1, "tid": 1, "ts": %s, "dur": 1}'


def _trace(tmp_path: Path, ts_of_b: str, name: str = "t-0-of-1.json", dur: str = "1") -> Path:
    events = [GOOD % ("a", "10.0"), GOOD % ("b", ts_of_b), GOOD % ("c", "30.0")]
    events[1] = events[1].replace('"dur": 1', f'"dur": {dur}')
    path = tmp_path / name
    path.write_text('{"traceEvents": [\n' + ",\n".join(events) + '\n], "traceName": "t"}')
    return path


def _load(path: Path, recwarn) -> tuple:
    df = load(path, cache=False)
    notes = [str(w.message) for w in recwarn]
    return df, notes


@pytest.mark.parametrize(
    ("ts", "why"),
    [
        ('"abc"', "#1: ts is 'abc', not a number"),
        ("null", "#1: ts is null"),
        ("1e400", "#1: ts is a number out of range"),
        ("1e300", "#1: ts is a number out of range"),
    ],
)
def test_an_event_whose_ts_cannot_be_read_is_skipped_with_index_and_reason(
    tmp_path, recwarn, ts, why
):
    df, notes = _load(_trace(tmp_path, ts), recwarn)
    assert df["name"].astype(str).tolist() == ["a", "c"]  # not b at ts 0, nothing else lost
    assert df["ts_ns"].tolist() == [10_000, 30_000]
    (note,) = [n for n in notes if "bad events" in n]
    assert f"skipped 1 bad events (index in traceEvents: why): {why}" in note
    assert not any("cut short" in n for n in notes), "the file is whole"
    assert df.attrs["ranks"][0]["skipped"] == 1
    assert df.attrs["ranks"][0]["events"] == 2


def test_epoch_times_read_exactly_skip_a_text_ts_too(tmp_path, recwarn):
    # ns decimals on epoch µs switch the reader to exact text times: the same rule holds
    path = _trace(tmp_path, '"soon"')
    path.write_text(path.read_text().replace("10.0", "1712195495519695.812"))
    df, notes = _load(path, recwarn)
    assert df["ts_ns"].tolist() == [1_712_195_495_519_695_812, 30_000]
    assert any("#1: ts is 'soon', not a number" in n for n in notes)


def test_a_dur_that_is_text_is_skipped_but_a_null_dur_is_missing(tmp_path, recwarn):
    df, notes = _load(_trace(tmp_path, "20.0", dur='"long"'), recwarn)
    assert df["name"].astype(str).tolist() == ["a", "c"]
    assert any("#1: dur is 'long', not a number" in n for n in notes)
    df = load(_trace(tmp_path, "20.0", name="n-0-of-1.json", dur="null"), cache=False)
    assert df["dur_ns"].tolist() == [1000, 0, 1000]  # null: no duration recorded


def test_many_bad_events_are_all_counted_and_the_first_named(tmp_path, recwarn):
    events = [GOOD % (f"e{i}", '"x"' if i % 2 else str(i)) for i in range(20)]
    path = tmp_path / "m-0-of-1.json"
    path.write_text('{"traceEvents": [' + ",".join(events) + "]}")
    df, notes = _load(path, recwarn)
    assert len(df) == 10
    (note,) = [n for n in notes if "bad events" in n]
    assert note.startswith("m-0-of-1.json: skipped 10 bad events")
    assert "#1: ts is 'x', not a number; #3:" in note and note.endswith("and 5 more")


def test_invalid_json_in_the_middle_is_not_called_a_cut_file(tmp_path, recwarn):
    path = _trace(tmp_path, "20.0")
    path.write_text(path.read_text().replace('"dur": 1}', '"dur": 1 x}', 2).replace(" x}", "}", 1))
    df, notes = _load(path, recwarn)
    assert df["name"].astype(str).tolist() == ["a"]
    assert any("event #1 or one soon after it is not valid JSON" in n for n in notes)
    assert not any("cut short" in n for n in notes)


def test_a_file_really_cut_short_still_says_so(tmp_path, recwarn):
    path = _trace(tmp_path, "20.0")
    path.write_bytes(path.read_bytes()[:-40])
    df, notes = _load(path, recwarn)
    assert df["name"].astype(str).tolist() == ["a", "b"]
    assert any("file cut short" in n for n in notes)


def test_an_array_of_numbers_loads_no_event_and_says_why(tmp_path, recwarn):
    path = tmp_path / "nums-0-of-1.json"
    path.write_text("[1, 2, 3]")
    df, notes = _load(path, recwarn)
    assert len(df) == 0
    assert any(
        "skipped 3 bad events (index in traceEvents: why): #0: 1 (int) is not a JSON object; "
        "#1: 2 (int) is not a JSON object; #2: 3 (int) is not a JSON object" in n
        for n in notes
    )
    assert not any("cut short" in n or "empty {}" in n for n in notes)


@pytest.mark.parametrize("action", [["summary"], ["top"], ["summary", "--json"]])
def test_cli_exits_non_zero_in_one_line_when_no_event_loaded(tmp_path, capsys, action):
    path = tmp_path / "nums-0-of-1.json"
    path.write_text("[1, 2, 3]")
    args = ["traces", action[0], str(path), *action[1:]]
    assert main(args) != 0
    captured = capsys.readouterr()
    assert captured.out == ""
    errors = [line for line in captured.err.splitlines() if not line.startswith("warning:")]
    assert len(errors) == 1
    assert f"{path}: no event loaded: skipped 3 bad events" in errors[0]


def test_cli_summary_counts_the_skipped_events(tmp_path, capsys):
    path = _trace(tmp_path, '"abc"')
    assert main(["traces", "summary", str(path)]) == 0
    captured = capsys.readouterr()
    assert "note: rank 0: 1 bad events skipped (see warnings)" in captured.out
    assert "#1: ts is 'abc', not a number" in captured.err


def test_a_skip_survives_the_cache(tmp_path, recwarn):
    path = _trace(tmp_path, '"abc"')
    first = load(path)  # writes the cache copy
    again = load(path)
    assert len(first) == len(again) == 2
    assert again.attrs["ranks"][0]["skipped"] == 1
    assert sum("bad events" in str(w.message) for w in recwarn) == 2  # said on every load


def test_good_traces_skip_nothing(recwarn):
    fixture = Path(__file__).parent / "fixtures" / "traces" / "kineto_xpu-1-of-2.json"
    df = load(fixture, cache=False)
    assert df.attrs["ranks"][1]["skipped"] == 0
    assert json.loads(fixture.read_text())["traceEvents"]  # the fixture is valid JSON
    assert not any("bad events" in str(w.message) for w in recwarn)
