"""Real train traces with shapes, memory and stacks, loaded again and again in one process.

Regression for ``BufferError: memoryview has 5977 exported buffers`` raised by ``load`` in a
Jupyter kernel on 2-rank train traces: a ``msgspec.Raw`` value (the exact ``ts`` text) keeps
a buffer export of the input it was decoded from, so decoding a view of the loader's growing
read buffer pinned that buffer while the view was released. The loader now hands msgspec
``bytes`` copies only; these tests load the traces the report used, twice, with the
collector on and off (a notebook kernel often has pending garbage), through both decoders
(float ``ts`` beside ``baseTimeNanoseconds``, and exact ``ts`` text for absolute epoch µs).
"""

from __future__ import annotations

import gc
import json
import os
import re
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from hpcprof_kit.traces import load
from hpcprof_kit.traces.read import stream as trace_stream
from hpcprof_kit.traces.table.schema import check_table

from launch import run_ok

TRAIN = [
    "-m", "hpcprof_kit.apps.train", "--epochs", "1", "--steps-per-epoch", "4",
    "--profile", "--prof-wait", "1", "--prof-warmup", "1", "--prof-active", "2",
    "--prof-repeat", "1", "--record-shapes", "--profile-memory", "--with-stack",
]  # fmt: skip


@pytest.fixture(scope="module")
def train_traces(tmp_path_factory, mpiexec) -> Path:
    """Traces of a real 2-rank gloo run of the train app with every recording option on."""
    out = tmp_path_factory.mktemp("train_full")
    env = dict(os.environ, KINETO_LOG_LEVEL="6", OMP_NUM_THREADS="1")
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(29600 + os.getpid() % 1000))
    cmd = [mpiexec, "-n", "2", sys.executable, *TRAIN, "--trace-dir", str(out / "traces")]
    run_ok(cmd, timeout=240, env=env, cwd=out)
    return out / "traces"


@pytest.fixture(scope="module")
def absolute_traces(train_traces, tmp_path_factory) -> Path:
    """The same traces in the older layout: absolute epoch µs with ns decimals and no
    ``baseTimeNanoseconds``. Such values are beyond float64's precision, so the loader reads
    each ``ts`` as its JSON text (a ``msgspec.Raw``)."""
    out = tmp_path_factory.mktemp("train_absolute")
    for f in sorted(train_traces.glob("*.json")):
        text = f.read_text()
        base = int(re.search(r'"baseTimeNanoseconds":\s*(\d+),', text).group(1))
        text = re.sub(r'"baseTimeNanoseconds":\s*\d+,', "", text, count=1)

        def absolute(m: re.Match, base: int = base) -> str:
            ns = base + round(Decimal(m.group(2)) * 1000)  # exact decimal arithmetic
            return f"{m.group(1)}{ns // 1000}.{ns % 1000:03d}"

        (out / f.name).write_text(re.sub(r'("ts":\s*)(-?\d+(?:\.\d+)?)', absolute, text))
    return out


def _raw_rows(folder: Path) -> dict[int, int]:
    """X and i events per rank, counted with the standard library."""
    rows = {}
    for f in sorted(folder.glob("*.json")):
        doc = json.loads(f.read_text())
        rank = doc["distributedInfo"]["rank"]
        rows[rank] = sum(1 for e in doc["traceEvents"] if e.get("ph") in ("X", "i"))
    return rows


def _load_twice(folder: Path, workers: int) -> list:
    return [load(folder, cache=False, workers=workers) for _ in range(2)]


def _same(a, b) -> None:
    assert a.shape == b.shape
    for col in a.columns:
        assert (a[col].astype(str) == b[col].astype(str)).all(), col


@pytest.mark.parametrize("workers", [1, 2])  # in the notebook's process, or one per rank
@pytest.mark.parametrize("collector", ["on", "off"])
def test_full_recording_traces_load_twice_in_one_process(train_traces, collector, workers):
    was_on = gc.isenabled()
    if collector == "off":
        gc.disable()
    try:
        first, second = _load_twice(train_traces, workers=workers)
    finally:
        if was_on:
            gc.enable()
    check_table(first)
    _same(first, second)
    assert sorted(first.attrs["ranks"]) == [0, 1]
    rows = _raw_rows(train_traces)
    for rank in (0, 1):
        assert (first["rank"] == rank).sum() == rows[rank]
    cats = set(first.cat.astype(str))
    assert {"python_function", "cpu_instant_event"} <= cats  # --with-stack, --profile-memory
    memory = first[first.name.astype(str) == "[memory]"]
    assert len(memory) > 0 and set(memory.track.astype(str)) == {"instant"}


def test_absolute_ts_traces_load_twice_with_the_collector_off(train_traces, absolute_traces):
    with_base = load(train_traces, cache=False, workers=1)
    was_on = gc.isenabled()
    gc.disable()
    try:
        first, second = _load_twice(absolute_traces, workers=1)
    finally:
        if was_on:
            gc.enable()
    _same(first, second)
    # the same instants to the nanosecond, whether written as base + µs or as epoch µs
    _same(first, with_base)


def test_msgspec_only_ever_decodes_immutable_bytes(absolute_traces, monkeypatch):
    seen: list[tuple[str, type]] = []

    class Recording:
        def __init__(self, name: str) -> None:
            self.name, self.decoder = name, getattr(trace_stream, name)

        def decode(self, text):
            seen.append((self.name, type(text)))
            return self.decoder.decode(text)

    for name in ("FAST", "EXACT"):
        monkeypatch.setattr(trace_stream, name, Recording(name))
    monkeypatch.setenv("HPCPROF_SCANNER", "off")  # every slice through msgspec
    df = load(absolute_traces, cache=False, workers=1)
    assert len(df) > 0
    assert {name for name, _ in seen} == {"FAST", "EXACT"}  # the Raw decoder was used
    assert {kind for _, kind in seen} == {bytes}
