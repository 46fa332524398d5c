"""The compiled trace scanner (``hpcprof_kit/traces/read/_scan.c``) gives exactly the table msgspec
gives.

Each slice the scanner reads in full must come out as the msgspec path reads it; a slice it
cannot read goes to msgspec untouched. Compared here on the real third-party traces, real
torch.profiler traces, the kit's fixtures (the defects seen in the wild), a synthetic Kineto
run, and random traces built from the odd corners of JSON that profilers and hand edits produce,
cut into many small slices so that both paths take turns within one file.
"""

from __future__ import annotations

import gzip
import json
import sys
from contextlib import contextmanager
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hpcprof_kit.errors import TraceFormatError
from hpcprof_kit.traces.read import stream
from hpcprof_kit.traces.read.kept_args import COLUMNS
from hpcprof_kit.traces.read.memory_events import file_memory_events, of_kept

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "traces"


def test_the_compiled_scanner_is_built():
    # setup.py builds it at install; CI installs gcc. Without it every slice goes to msgspec,
    # correct but about 2.6x slower (benchmarks/bench_parse.py).
    assert stream._scan is not None, (
        "hpcprof_kit/traces/read/_scan.c was not compiled: install a C compiler (gcc) and run "
        "'pip install -e .' again"
    )


@contextmanager
def _slices_of(size: int):
    with mock.patch.object(stream, "SLICE_BYTES", size):
        yield


def read(path: Path, scanner: bool) -> tuple[stream.ChromeTrace, stream._Reader]:
    """The trace read with or without the compiled scanner, and the reader that read it."""
    readers = []

    class Watched(stream._Reader):
        def __init__(self, p: Path) -> None:
            super().__init__(p)
            if not scanner:
                self.scanner = None
            readers.append(self)

    with mock.patch.object(stream, "_Reader", Watched):
        trace = stream.read_chrome(path)
    return trace, readers[0]


def assert_same_trace(a: stream.ChromeTrace, b: stream.ChromeTrace) -> None:
    assert a.vocab == b.vocab
    assert a.columns.keys() == b.columns.keys()
    for name in a.columns:
        assert a.columns[name].dtype == b.columns[name].dtype, name
        np.testing.assert_array_equal(a.columns[name], b.columns[name], err_msg=name)
    assert a.warnings == b.warnings
    assert (a.skipped.count, a.skipped.first) == (b.skipped.count, b.skipped.first)
    assert a.header == b.header
    assert a.process_names == b.process_names and a.thread_names == b.thread_names
    assert a.text_bytes == b.text_bytes
    assert a.arg_keys == b.arg_keys
    assert_same_args(a.args, b.args)


def assert_same_args(a: dict | None, b: dict | None) -> None:
    """The arguments the rules read, kept alike (or not kept by either)."""
    assert (a is None) == (b is None)
    assert a is None or a.keys() == b.keys()
    for name in a or ():
        assert a[name].dtype == b[name].dtype, name
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def compare(path: Path) -> tuple[stream._Reader, stream._Reader]:
    (fast, fast_reader), (slow, slow_reader) = read(path, True), read(path, False)
    assert_same_trace(fast, slow)
    assert slow_reader.scanned == 0
    return fast_reader, slow_reader


def test_real_gpu_traces_read_the_same_and_in_c(shared_traces):
    files = sorted((shared_traces / "hta").glob("*.json.gz"))
    assert len(files) >= 6
    for path in files:
        fast, _ = compare(path)
        if "rocm" in path.name:  # its "stream": "0x0" is text: those slices go to msgspec
            assert fast.decoded > 0
        else:  # Kineto CUDA and CPU traces: every slice in C
            assert (fast.scanned, fast.decoded) != (0, 0) and fast.decoded == 0, path.name


def test_real_gpu_traces_in_small_slices_read_the_same(shared_traces):
    # 4 KiB slices: hundreds of cuts per file, each at a different kind of event
    with _slices_of(4096):
        for path in sorted((shared_traces / "hta").glob("*.json.gz")):
            compare(path)


@pytest.mark.parametrize(
    "name",
    sorted(p.name for p in FIXTURES.glob("*.json")) + ["ddp_cpu_2rank/trace-0-of-2.json.gz"],
)
def test_fixtures_read_the_same(name):
    path = FIXTURES / name
    if name == "not_a_trace.json":
        for scanner in (True, False):
            with pytest.raises(Exception, match="not a trace file"):
                read(path, scanner)
        return
    compare(path)


def test_a_synthetic_kineto_run_is_read_in_c(tmp_path):
    sys.path.insert(0, str(REPO / "benchmarks"))
    from make_synthetic_trace import write_trace

    path = tmp_path / "synthetic-0-of-2.json"
    write_trace(path, 3, rank=0, world=2)
    fast, slow = compare(path)
    assert fast.decoded == 0 and fast.scanned == slow.decoded > 5


def test_epoch_times_with_nanoseconds_stay_exact_in_c(tmp_path):
    events = [
        {"ph": "X", "name": "a", "ts": "1712195495519695.812", "dur": "1.5"},
        {"ph": "X", "name": "b", "ts": "1712195495519695.813", "dur": "2"},
    ]
    path = tmp_path / "t.json"
    body = ",".join(
        f'{{"ph": "X", "name": "{e["name"]}", "ts": {e["ts"]}, "dur": {e["dur"]}}}' for e in events
    )
    path.write_text(f'{{"traceEvents": [{body}]}}')
    fast, reader = read(path, True)
    assert reader.scanned == 1 and reader.exact
    assert fast.columns["ts_ns"].tolist() == [1712195495519695812, 1712195495519695813]
    assert fast.columns["dur_ns"].tolist() == [1500, 2000]
    compare(path)


def test_the_argument_keys_of_kept_events_are_noted_alike_either_way(tmp_path):
    # the keys the rules' arguments hang on, in a kept event's args: noted; in a metadata
    # event, nested deeper or beside args: not (the report searches only files holding them)
    events = [
        {"ph": "X", "name": "Memcpy HtoD", "ts": 1, "dur": 2, "args": {"bytes": 64}},
        {"ph": "i", "name": "k", "ts": 3, "args": {"grid": [4, 1, 1], "correlation": 5}},
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "p", "size": 3}},
        {"ph": "X", "name": "c", "ts": 4, "dur": 1, "args": {"x": {"Collective name": "a"}}},
        {"ph": "X", "name": "d", "ts": 5, "dur": 1, "Input Dims": [[2]], "args": {}},
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events}))
    fast, slow = compare(path)
    assert fast.scanned == 1 and fast.decoded == 0
    assert stream.read_chrome(path).arg_keys == ("bytes", "grid")
    path.write_text(json.dumps({"traceEvents": events[2:]}))
    compare(path)
    assert stream.read_chrome(path).arg_keys == ()


def test_the_rules_arguments_are_kept_alike_either_way(tmp_path):
    """The arguments the rules read, kept in the same pass: plain values read in C, odd ones
    (a size as text or a whole float, a negative one, an escaped name, a repeated key, a value
    of another type, which counts as absent) left to Python, and the same columns from
    msgspec; events without one of the keys the rules look for (``Input type`` alone, a
    metadata event) give no row."""
    x = {"ph": "X", "ts": 1, "dur": 1}
    events = [
        {
            **x,
            "name": "Memcpy HtoD (Pageable -> Device)",
            "args": {"bytes": 4096, "correlation": 7},
        },
        {**x, "name": "hipMemcpyWithStream", "args": {"bytes": "2560", "correlation": 8}},
        {**x, "name": "w", "args": {"bytes": 64.0, "External id": 9}},
        {**x, "name": "n", "args": {"bytes": -5}},
        {
            **x,
            "name": "nccl:all_reduce",
            "args": {
                "Collective name": "all\\u0072educe",  # escaped in the file
                "In msg nelems": 100,
                "dtype": "Half",
                "Group size": 8,
                "correlation": 10,
            },
        },
        {
            **x,
            "name": "nccl:broadcast",
            "args": {"Collective name": "broadcast", "In msg nelems": 10, "Group size": 2},
        },
        {**x, "name": "c", "args": {"Collective name": None, "bytes": None}},
        {
            **x,
            "name": "aten::mm",
            "args": {
                "Input Dims": [[2, 2]],
                "Input type": ["float", "c10::Half"],
                "External id": 11,
            },
        },
        {**x, "name": "aten::add", "args": {"Input Dims": [], "Input type": None}},
        {**x, "name": "aten::relu", "args": {"Input type": ["float"]}},
        {**x, "name": "odd", "args": {"bytes": True, "Input type": 5, "Group size": "8"}},
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "p", "bytes": 3}},
    ]
    text = json.dumps({"traceEvents": events}).replace(r"\\u0072", r"\u0072")  # an escape
    path = tmp_path / "t.json"
    path.write_text(text)
    fast, slow = compare(path)
    assert fast.scanned == 1 and fast.decoded == 0 and slow.scanned == 0
    kept = stream.read_chrome(path).args
    assert {c: v.tolist() for c, v in kept.items() if c in COLUMNS} == {
        "corr": [7, 8, -1, -1, 10, -1, -1, -1, -1],
        "ext": [-1, -1, 9, -1, -1, -1, 11, -1, -1],
        "bytes": [4096, 2560, 64, -5, 200, 40, -1, -1, -1],
        "coll": ["", "", "", "", "allreduce", "broadcast", "", "", ""],
        "group": [-1, -1, -1, -1, 8, 2, -1, -1, 8],
        "input_type": ["", "", "", "", "", "", "float,c10::Half", "", ""],
    }
    # a repeated key: the last value, as msgspec reads it, either way
    path.write_text(text.replace('"bytes": -5', '"bytes": 1, "bytes": 2'))
    compare(path)
    assert stream.read_chrome(path).args["bytes"].tolist()[3] == 2


def kept_memory(path: Path) -> dict[str, list]:
    """The [memory] columns the loader kept of one file, without their prefix."""
    return {c: v.tolist() for c, v in of_kept(stream.read_chrome(path).args).items()}


def test_the_memory_events_are_kept_alike_either_way_and_as_the_file_has_them(tmp_path):
    """The [memory] events' args, kept in the same pass (plain whole numbers read in C; a
    float, a number beyond 15 digits, text, left to Python with the event's place; a slice
    msgspec reads searched for them): the same columns either way, and the same as reading
    the file again gives. Only instant events named [memory] count: not an X event of that
    name, nor an event whose args merely hold the text."""
    base = 1_700_000_000_000_000_000
    mem = {"ph": "i", "s": "t", "name": "[memory]", "pid": 7, "tid": 8}
    events = [
        {
            **mem,
            "ts": 1.5,
            "args": {
                "Total Reserved": 0,
                "Total Allocated": 64,
                "Bytes": 64,
                "Device Id": -1,
                "Device Type": 0,
                "Addr": 2**46,
            },
        },
        {
            **mem,
            "ts": 2.5,
            "args": {
                "Total Allocated": 0,
                "Bytes": -64,
                "Device Id": 0,
                "Device Type": 1,
                "Addr": 2**46,
            },
        },
        {**mem, "ts": 3.25, "args": {"Bytes": 8.0, "Device Type": 12, "Addr": None}},
        {**mem, "ph": "X", "ts": 4, "dur": 1, "args": {"Bytes": 5}},
        {"ph": "X", "name": "log", "ts": 5, "dur": 1, "args": {"text": "[memory]"}},
        {**mem, "ph": "I", "tid": "main", "ts": 6.125, "args": {"Bytes": 1, "Addr": 2**53 + 1}},
    ]
    text = json.dumps({"baseTimeNanoseconds": base, "traceEvents": events})
    path = tmp_path / "t.json"
    path.write_text(text)
    fast, slow = compare(path)
    assert fast.scanned == 1 and fast.decoded == 0
    kept = kept_memory(path)
    assert kept["ts_ns"] == [base + 1500, base + 2500, base + 3250, base + 6125]
    assert kept["bytes"] == [64, -64, 8, 1] and kept["device_type"] == ["cpu", "cuda", "xpu", "cpu"]
    assert kept["tid"] == ["8", "8", "8", "main"] and kept["has_addr"] == [True, True, False, True]
    file = file_memory_events(str(path))
    assert kept == {c: v.tolist() for c, v in file.items()}
    # a slice msgspec reads (a time with an exponent): searched for them, the same
    path.write_text(text.replace('"ts": 5,', '"ts": 5e0,'))
    fast, _ = compare(path)
    assert fast.scanned == 0 and kept_memory(path) == kept


# Random traces: each field's JSON text drawn from what readers meet: mostly what profilers
# write (read in C), sometimes the odd corner (a slice holding one goes to msgspec).
_ws = st.sampled_from(["", " ", "\n    ", "\t"])
_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), max_codepoint=0x1F600), max_size=12
)
_string = st.builds(lambda s, a: json.dumps(s, ensure_ascii=a), _text, st.booleans())
_decimals = st.integers(0, 3).flatmap(
    lambda n: st.integers(0, 10**n - 1).map(lambda v: "" if n == 0 else "." + str(v).zfill(n))
)
_whole = st.one_of(
    st.integers(0, 10**7), st.integers(8 * 10**12 - 5, 8 * 10**12 + 5), st.integers(0, 2**53)
)


def _either(plain, odd):
    """Mostly ``plain``, one time in forty ``odd``."""
    return st.integers(0, 39).flatmap(lambda i: odd if i == 0 else plain)


_time = _either(
    st.builds(lambda s, w, d: f"{s}{w}{d}", st.sampled_from(["", "", "-"]), _whole, _decimals),
    st.sampled_from(
        ["null", '"abc"', '"12.5"', "1e400", "1.5e3", "true", "[]", "-0", "1.2345", "1.000001",
         str(2**53 + 1), "9007199254740993.5"]
    ),
)  # fmt: skip
_duration = _either(
    st.one_of(st.floats(-1e6, 1e9, allow_nan=False).map(repr), st.integers(0, 10**6).map(str)),
    st.sampled_from(["null", '"x"', "1e400", "2.5E2", "0.0005", "0.0015", "1e15", "-0.0"]),
)
_scalar = _either(
    st.one_of(st.integers(-5, 10**6).map(str), _string, st.just("null"), st.just("1.5")),
    st.one_of(
        st.integers(-(2**70), 2**70).map(str),
        st.sampled_from(["true", '{"a": 1}', "[1]", "1e2", "1.0"]),
    ),
)
_phase = _either(
    st.sampled_from(["X", "X", "X", "i", "I", "M", "B", "s", "f", "XX", "é"]).map(json.dumps),
    st.sampled_from(["null", "5", '"\\u0058"', '""']),
)
_id = _either(
    st.integers(-5, 10**6).map(str),
    st.sampled_from([str(2**53 + 1), str(2**64), "5.0", '"0x0"', '"12"', "null", "true"]),
)
_ARG_NAMES = ["correlation", "External id", "device", "stream", "sycl queue", "name", "cbid",
              "bytes", "size", "Collective name", "Input Dims", "grid", "In msg nelems",
              "dtype", "Group size", "Input type", "Bytes", "Total Allocated", "Device Type",
              "Device Id", "Addr"]  # fmt: skip
_args = _either(
    st.lists(st.tuples(st.sampled_from(_ARG_NAMES), _id), max_size=5, unique_by=lambda a: a[0]),
    st.one_of(
        st.lists(st.tuples(st.sampled_from(_ARG_NAMES), _string), min_size=1, max_size=2),
        st.sampled_from(["null", "[]", '"x"', '{"a": [1, {"b": 2}]}']),
    ),
)


@st.composite
def _event(draw) -> str:
    fields = []
    if draw(st.integers(0, 30)):
        fields.append(("ph", draw(_phase)))
    for key, strategy in (
        ("cat", _either(_string, st.sampled_from(["null", "3"]))),
        ("name", _either(st.one_of(_string, st.just('"[memory]"')), st.just("null"))),
        ("pid", _scalar),
        ("tid", _scalar),
        ("ts", _time),
        ("dur", _duration),
    ):
        if draw(st.integers(0, 15)):
            fields.append((key, draw(strategy)))
    if draw(st.integers(0, 5)):
        args = draw(_args)
        if isinstance(args, list):
            args = "{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in args) + "}"
        fields.append(("args", args))
    if draw(st.integers(0, 5)) == 0:  # a field the table does not read
        key = draw(st.sampled_from(["id", "bp", "s", "nested"]))
        fields.append((key, '{"a": [1, {"b": null}], "c": "\\"q\\""}'))
    if fields and draw(st.integers(0, 30)) == 0:  # a field written twice
        fields.append(fields[0])
    fields = draw(st.permutations(fields))
    w = draw(_ws)
    return "{" + f",{w}".join(f"{w}{json.dumps(k)}{w}:{w}{v}" for k, v in fields) + w + "}"


_item = _either(_event(), st.sampled_from(["{}", "3", '"x"', "null"]))


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(items=st.lists(_item, min_size=1, max_size=40), gz=st.booleans())
def test_random_traces_read_the_same_either_way(tmp_path, items, gz):
    text = '{"schemaVersion": 1, "traceEvents": [\n' + ",\n".join(items) + "\n]}"
    path = tmp_path / ("t.json.gz" if gz else "t.json")
    data = text.encode()
    path.write_bytes(gzip.compress(data) if gz else data)
    with _slices_of(160):  # a few events per slice: scanned and decoded slices interleave
        try:
            compare(path)
        except TraceFormatError as refused:  # refused either way, in the same words
            with pytest.raises(TraceFormatError) as also:
                read(path, False)
            assert str(also.value) == str(refused)
