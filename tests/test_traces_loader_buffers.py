"""Real train traces with shapes, memory and stacks, loaded again and again in one process.

Regression for ``BufferError: memoryview has 5977 exported buffers`` raised by ``load`` in a
Jupyter kernel on 2-rank train traces: a ``msgspec.Raw`` value (the exact ``ts`` text) keeps
a buffer export of the input it was decoded from, so decoding a view of the loader's growing
read buffer pinned that buffer while the view was released. The loader now hands msgspec
``bytes`` copies only; these tests load the traces the report used, twice, with the
collector on and off (a notebook kernel often has pending garbage), through both decoders.
"""

from __future__ import annotations

import gc
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hpcprof_kit.traces import load
from hpcprof_kit.traces import stream as trace_stream
from hpcprof_kit.traces.schema import check_table

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
    subprocess.run(cmd, check=True, env=env, timeout=240, cwd=out, capture_output=True)
    return out / "traces"


@pytest.fixture(scope="module")
def exact_traces(train_traces, tmp_path_factory) -> Path:
    """The same traces without ``baseTimeNanoseconds``: 13-digit µs with decimals, so the
    loader reads ``ts`` as text (``msgspec.Raw``) to keep every nanosecond."""
    out = tmp_path_factory.mktemp("train_exact")
    for f in sorted(train_traces.glob("*.json")):
        text = f.read_text()
        stripped = re.sub(r'"baseTimeNanoseconds":\s*\d+,', "", text, count=1)
        assert stripped != text, f"{f.name} has no baseTimeNanoseconds to strip"
        (out / f.name).write_text(stripped)
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


@pytest.mark.parametrize("collector", ["on", "off"])
def test_full_recording_traces_load_twice_in_one_process(train_traces, collector):
    was_on = gc.isenabled()
    if collector == "off":
        gc.disable()
    try:
        first, second = _load_twice(train_traces, workers=1)
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


def test_exact_ts_traces_load_twice_with_the_collector_off(train_traces, exact_traces):
    with_base = load(train_traces, cache=False, workers=1)
    was_on = gc.isenabled()
    gc.disable()
    try:
        first, second = _load_twice(exact_traces, workers=1)
    finally:
        if was_on:
            gc.enable()
    _same(first, second)
    assert len(first) == len(with_base)
    # Without the base the times are the µs text itself: the same instants, to the ns.
    for rank in (0, 1):
        base = json.loads((train_traces / f"trace-{rank}-of-2.json").read_text())[
            "baseTimeNanoseconds"
        ]
        got = first[first["rank"] == rank].ts_ns.to_numpy()
        want = with_base[with_base["rank"] == rank].ts_ns.to_numpy() - base
        assert (got == want).all()


def test_msgspec_only_ever_decodes_immutable_bytes(exact_traces, monkeypatch):
    seen: list[type] = []

    class Recording:
        def __init__(self, decoder) -> None:
            self.decoder = decoder

        def decode(self, text):
            seen.append(type(text))
            return self.decoder.decode(text)

    for name in ("FAST", "EXACT"):
        monkeypatch.setattr(trace_stream, name, Recording(getattr(trace_stream, name)))
    df = load(exact_traces, cache=False, workers=1)
    assert len(df) > 0 and len(seen) >= 2
    assert set(seen) == {bytes}
