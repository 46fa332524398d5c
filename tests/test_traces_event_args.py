"""Event arguments read back from the trace files: copy bytes, kinds and memory kinds,
collective sizes, input shapes, launch shapes, on real traces (torch.profiler runs recorded
here, the kit's own CUDA H100 and two-cycle DDP fixtures, and the shared CUDA, ROCm and XPU
traces), each checked against the JSON the profiler wrote."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import warnings
from pathlib import Path

import pandas as pd
import pytest

from hpcprof_kit import traces
from hpcprof_kit.errors import TraceFormatError
from hpcprof_kit.traces.table.event_args import COLUMNS, event_args

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "traces"


def _load(path) -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return traces.load(path, cache=False, workers=1)


def _raw(path: Path) -> list[dict]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        return json.load(fh)["traceEvents"]


def _with_rows(df: pd.DataFrame, args: pd.DataFrame) -> pd.DataFrame:
    return args.join(df[["track", "name", "rank", "step"]])


GLOO_RUN = """
import sys
import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile

out = sys.argv[1]
dist.init_process_group("gloo", init_method=f"file://{out}/store", rank=0, world_size=1)
try:
    x, y = torch.ones(1000), torch.ones(64, 32, dtype=torch.bfloat16)
    a, b = torch.randn(8, 16), torch.randn(16, 4)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        dist.all_reduce(x)
        dist.all_reduce(y)
        torch.mm(a, b)
finally:
    dist.destroy_process_group()
prof.export_chrome_trace(f"{out}/train-0-of-1.json")
"""


@pytest.fixture(scope="module")
def gloo_run(tmp_path_factory):
    """A real torch.profiler run (CPU, record_shapes=True) of two gloo all-reduces (1000
    floats, 64x32 bf16) and a matmul, in a one-rank process group: in a process of its own,
    so no state an earlier test left in this worker's torch changes what is recorded."""
    import subprocess
    import sys

    out = tmp_path_factory.mktemp("gloo")
    subprocess.run([sys.executable, "-c", GLOO_RUN, str(out)], check=True, timeout=300)
    return out / "train-0-of-1.json"


def test_gloo_collectives_are_sized_from_their_recorded_inputs(gloo_run):
    df = _load(gloo_run)
    got = _with_rows(df, event_args(df, kinds=["collectives"]))
    gloo = got[got["name"] == "gloo:all_reduce"]
    assert gloo[["collective", "msg_elems", "dtype", "bytes"]].values.tolist() == [
        ["allreduce", 1000, "Float", 4000],
        ["allreduce", 2048, "BFloat16", 4096],
    ]
    # asked for collectives only: no copy, launch or (for other ops) shape columns filled
    assert got[["copy_kind", "grid", "block"]].isna().all().all()


def test_input_shapes_are_the_recorded_text(gloo_run):
    df = _load(gloo_run)
    got = _with_rows(df, event_args(df, kinds="inputs"))
    mm = got[got["name"] == "aten::mm"].iloc[0]
    assert json.loads(mm["input_dims"]) == [[8, 16], [16, 4]]
    assert json.loads(mm["input_types"]) == ["float", "float"]
    assert got["collective"].isna().all()  # collectives not asked for


def test_two_ranks_two_cycles_each_row_gets_its_own_events_args():
    """Four files (ranks 0 and 1, cycles 0 and 1): every op with shapes in the files has a
    row, and each row's shapes are its own event's, not another cycle's or rank's."""
    folder = FIXTURES / "memory" / "traces"
    df = _load(folder)
    got = _with_rows(df, event_args(df, kinds=["inputs"]))
    table = df.join(got[["input_dims"]], how="inner")
    want = {}
    for f in sorted(folder.iterdir()):
        rank = int(f.name.split("-")[-3])
        cycle = 1 if "_cycle1" in f.name else 0
        for e in _raw(f):
            if e.get("ph") == "X" and "Input Dims" in e.get("args", {}):
                want.setdefault((rank, cycle, e["name"]), []).append(e["args"]["Input Dims"])
    assert sum(map(len, want.values())) == len(table) > 100
    for (rank, cycle, name), dims in want.items():
        rows = table[(table["rank"] == rank) & (table["cycle"] == cycle) & (table["name"] == name)]
        assert sorted(map(json.loads, rows["input_dims"]), key=str) == sorted(dims, key=str)


def test_rows_keep_the_labels_of_a_filtered_table():
    df = _load(FIXTURES / "memory" / "traces")
    one = df[(df["rank"] == 1) & (df["cycle"] == 1)]
    got = event_args(one, kinds=["inputs"])
    assert len(got) and set(got.index) <= set(one.index)
    assert list(got.index) == sorted(got.index)  # table order
    whole = event_args(df, kinds=["inputs"])
    pd.testing.assert_frame_equal(got, whole.loc[got.index])


def test_h100_copies_kernels_and_record_param_comms(shared_traces):
    path = FIXTURES / "cuda_h100" / "eager-0-of-1.json.gz"
    df = _load(path)
    got = _with_rows(df, event_args(df))
    raw = [e for e in _raw(path) if e.get("ph") == "X"]
    copies = got[got["track"] == "memcpy"]
    assert copies["copy_kind"].value_counts().to_dict() == {"DtoD": 84, "HtoD": 4, "DtoH": 2}
    assert copies.groupby("copy_kind")["mem_kind"].first().to_dict() == {
        "DtoD": "Device",
        "DtoH": "Pinned",
        "HtoD": "Pageable",
    }
    want = sum(e["args"]["bytes"] for e in raw if e.get("cat") == "gpu_memcpy")
    assert int(copies["bytes"].sum()) == want
    comms = got[got["name"] == "record_param_comms"]
    assert (
        comms[["collective", "msg_elems", "dtype", "group_size", "bytes"]].values.tolist()
        == [["allreduce", 21504, "Float", 1, 86016]] * 2
    )
    kernels = got[got["track"] == "gpu"]
    first = next(e for e in raw if e.get("cat") == "kernel")
    row = kernels.iloc[0]
    assert json.loads(row["grid"]) == first["args"]["grid"]
    assert json.loads(row["block"]) == first["args"]["block"]
    assert len(kernels) == sum(e.get("cat") == "kernel" for e in raw) == 450


def test_shared_cuda_trace_pageable_and_pinned_copies_and_nccl_sizes(shared_traces):
    df = _load(shared_traces / "hta" / "cuda_rank0_of_128.json.gz")
    got = _with_rows(df, event_args(df))
    copies = got[got["track"] == "memcpy"]
    kinds = copies.groupby(["copy_kind", "mem_kind"]).size().to_dict()
    assert kinds == {
        ("DtoD", "Device"): 8,
        ("DtoH", "Pageable"): 8,
        ("HtoD", "Pageable"): 16,
        ("HtoD", "Pinned"): 8,
    }
    nccl = got[got["name"] == "nccl:all_reduce"].dropna(subset=["msg_elems"])
    assert nccl.iloc[0][["collective", "msg_elems", "dtype", "bytes"]].tolist() == [
        "allreduce",
        19618307,
        "Float",
        19618307 * 4,
    ]


def test_shared_cuda_one_rank_memsets_and_collective_bytes(shared_traces):
    path = shared_traces / "hta" / "cuda_1rank_ns_resolution.json.gz"
    df = _load(path)
    got = _with_rows(df, event_args(df, kinds=["copies", "collectives"]))
    raw = [e for e in _raw(path) if e.get("ph") == "X"]
    memsets = got[got["track"] == "memset"]
    assert len(memsets) == 145 and set(memsets["mem_kind"]) == {"Device"}
    assert int(memsets["bytes"].sum()) == sum(
        e["args"]["bytes"] for e in raw if e.get("cat") == "gpu_memset"
    )
    comms = got[got["name"] == "record_param_comms"]
    first = next(e["args"] for e in raw if e.get("name") == "record_param_comms")
    assert comms.iloc[0][["collective", "msg_elems", "dtype"]].tolist() == [
        first["Collective name"],
        first["In msg nelems"],
        first["dtype"],
    ]
    assert comms.iloc[0]["bytes"] == 2049000 * 4


def test_rocm_copies_take_their_size_from_the_runtime_call(shared_traces):
    df = _load(shared_traces / "hta" / "rocm_mi250_1rank.json.gz")
    got = _with_rows(df, event_args(df))
    copies = got[got["track"] == "memcpy"]
    # the device copy carries no bytes; hipMemcpyWithStream says "size": "2560"
    assert copies[["copy_kind", "bytes"]].values.tolist() == [["HtoD", 2560]] * 2
    assert copies["mem_kind"].isna().all()  # "Host": pageable or pinned, the trace does not say
    launches = got[got["track"] == "runtime"].dropna(subset=["grid"])
    assert launches["name"].astype(str).value_counts().to_dict() == {
        "hipLaunchKernel": 12,
        "hipExtModuleLaunchKernel": 2,
    }


def test_xpu_copies(shared_traces):
    df = _load(shared_traces / "xpu" / "atpesc_xpu_eager_sample.json")
    got = _with_rows(df, event_args(df))
    copies = got[got["track"] == "memcpy"]
    assert copies[["copy_kind", "bytes"]].values.tolist() == [["HtoD", 65536], ["HtoD", 1310720]]
    assert copies["mem_kind"].isna().all()  # MEMORY(Unknown)


def test_columns_and_types_are_the_contract():
    df = _load(FIXTURES / "kineto_xpu-1-of-2.json")
    got = event_args(df)
    assert tuple(got.columns) == COLUMNS
    assert {c: str(got[c].dtype) for c in ("bytes", "msg_elems", "group_size")} == {
        "bytes": "Int64",
        "msg_elems": "Int64",
        "group_size": "Int64",
    }
    assert str(got["copy_kind"].dtype) == "string"


def test_unknown_kind_names_the_choices():
    df = _load(FIXTURES / "kineto_xpu-1-of-2.json")
    with pytest.raises(ValueError, match=r"\['shapes'\] not among .*'copies', 'collectives'"):
        event_args(df, kinds=["shapes"])


def test_a_moved_trace_file_says_to_load_again(tmp_path):
    path = tmp_path / "t-0-of-1.json"
    shutil.copy(FIXTURES / "kineto_xpu-1-of-2.json", path)
    df = _load(path)
    os.remove(path)
    with pytest.raises(TraceFormatError, match="cannot be read now .* load the traces again"):
        event_args(df)


def test_traces_event_args_stays_the_function_after_its_module_is_imported():
    """The report's panes tell users to call traces.event_args(df, kinds=...): importing the
    module that holds it, in any order, must not turn that name into a module."""
    import importlib

    from hpcprof_kit import traces

    importlib.import_module(event_args.__module__)
    assert traces.event_args is event_args and callable(traces.event_args)


def test_the_key_search_reads_the_same_events_with_and_without_memmem(tmp_path, monkeypatch):
    from hpcprof_kit.traces.read import event_args_files as eaf

    h100 = FIXTURES / "cuda_h100" / "eager-0-of-1.json.gz"
    keyless = tmp_path / "plain-0-of-2.json"  # a header that says "world_size", no arg key
    keyless.write_text(json.dumps({"distributedInfo": {"rank": 0, "world_size": 2},
        "traceEvents": [{"ph": "X", "name": "k", "pid": 0, "tid": 7, "ts": 1, "dur": 2,
                         "args": {"correlation": 3}}]}))  # fmt: skip
    raw = [e for e in _raw(h100) if e.get("ph") in ("X", "i", "I")]
    want = sum(e["args"]["bytes"] for e in raw if "bytes" in e.get("args", {}))
    kinds = ("copies", "collectives", "inputs")
    answers = []
    for memmem in (eaf._MEMMEM, None):  # the C library's search, then Python's own
        monkeypatch.setattr(eaf, "_MEMMEM", memmem)
        eaf._read.cache_clear()
        got = eaf.file_event_args(str(h100), kinds)
        assert sum(b for b in got["bytes"] if b is not None) == want > 0
        assert eaf.file_event_args(str(keyless), kinds)["ts_ns"] == []
        text = keyless.read_bytes()
        assert not eaf._holds_any(text, (b'"size"', b'"bytes"'))  # "world_size" is no key
        assert eaf._holds_any(text, (b'"size"', b'"correlation"'))
        answers.append(got)
    eaf._read.cache_clear()
    assert answers[0] == answers[1]


def test_many_rank_files_read_in_parallel_give_the_serial_answer(tmp_path, monkeypatch):
    """More rank files than the reader's cache holds are read by worker processes too: the
    same rows in the same order as one process reading them, a missing file skipped alike."""
    from hpcprof_kit.traces.view import args as fargs

    n = fargs.PARALLEL_FROM + 3
    meta = {}
    for r in range(n):
        path = tmp_path / f"t-{r}-of-{n}.json"
        events = [{"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)",
                   "ts": 10 * i, "dur": 2, "args": {"bytes": 1000 * r + i, "correlation": i}}
                  for i in range(r % 4)]  # fmt: skip
        path.write_text(json.dumps({"traceEvents": events}))
        meta[r] = {"source": str(path)}
    meta[n] = {"source": str(tmp_path / "gone-0-of-1.json")}  # moved away: no rows
    parallel = fargs.run_args(meta)
    monkeypatch.setattr(fargs, "PARALLEL_FROM", 10**9)
    serial = fargs.run_args(meta)
    pd.testing.assert_frame_equal(parallel, serial)
    want = [(r, i, 1000 * r + i) for r in range(n) for i in range(r % 4)]
    assert list(zip(parallel["rank"], parallel["corr"], parallel["bytes"], strict=True)) == want


def test_the_loader_keeps_the_arguments_so_no_file_is_searched(tmp_path, monkeypatch):
    """The loader keeps the arguments the rules read as it reads each file: the rules search
    no file, and get what searching every file gives. Without them (a cache copy of old), the
    files the loader found any argument key in are searched, and only those."""
    from hpcprof_kit.traces.view import args as fargs

    copy = {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pageable)",
            "ts": 10, "dur": 2, "args": {"bytes": 4096, "correlation": 7}}  # fmt: skip
    launch = {"ph": "X", "cat": "kernel", "name": "k", "ts": 20, "dur": 3,
              "args": {"grid": [1, 1, 1], "correlation": 8}}  # fmt: skip
    for rank, events in enumerate(([copy, launch], [launch], [])):
        (tmp_path / f"t-{rank}-of-3.json").write_text(json.dumps({"traceEvents": events}))
    df = _load(tmp_path)
    meta = df.attrs["ranks"]
    assert [meta[r]["arg_keys"] for r in range(3)] == [["bytes", "grid"], ["grid"], []]
    searched = []
    real = fargs.file_args
    monkeypatch.setattr(fargs, "file_args", lambda p: searched.append(Path(p).name) or real(p))
    got = fargs.run_args(meta)
    assert searched == []
    assert list(zip(got["rank"], got["corr"], got["bytes"], strict=True)) == [(0, 7, 4096)]
    old = {r: {k: v for k, v in m.items() if k != "event_args"} for r, m in meta.items()}
    pd.testing.assert_frame_equal(got, fargs.run_args(old))
    assert searched == ["t-0-of-3.json"]
    unknown = {r: {**m, "arg_keys": None} for r, m in old.items()}  # older still: no keys
    pd.testing.assert_frame_equal(got, fargs.run_args(unknown))
    assert sorted(searched[1:]) == ["t-0-of-3.json", "t-1-of-3.json", "t-2-of-3.json"]
    # files gone since the load: the kept arguments stand; without them, a gone file gives no
    # rows, and with every file gone nothing is known (None)
    for rank in range(3):
        (tmp_path / f"t-{rank}-of-3.json").unlink()
    pd.testing.assert_frame_equal(got, fargs.run_args(meta))
    assert fargs.run_args(old) is None and fargs.run_args(unknown | {0: {}}) is None
