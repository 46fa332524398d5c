"""The trace loader on real torch.profiler traces (one process, and 2 gloo ranks via mpiexec)
and on the handwritten XPU layouts (Kineto XPU, unitrace)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import warnings
from decimal import Decimal
from pathlib import Path

import pytest

from hpcprof_kit.errors import TraceFormatError
from hpcprof_kit.traces import classify_comm, load, load_file
from hpcprof_kit.traces.table.schema import check_table

FIXTURES = Path(__file__).parent / "fixtures" / "traces"

PROFILE_SCRIPT = r"""
import os, sys
import torch
import torch.distributed as dist
from torch.profiler import ProfilerActivity, profile, schedule

world = int(os.environ.get("PMI_SIZE", "1"))
rank = int(os.environ.get("PMI_RANK", "0"))
if world > 1:
    dist.init_process_group("gloo", rank=rank, world_size=world)
model = torch.nn.Linear(32, 32)
sched = schedule(wait=1, warmup=1, active=2, repeat=1)
with profile(activities=[ProfilerActivity.CPU], schedule=sched) as prof:
    for _ in range(5):
        loss = model(torch.randn(16, 32)).sum()
        loss.backward()
        if world > 1:
            dist.all_reduce(model.weight.grad)
        prof.step()
prof.export_chrome_trace(os.path.join(sys.argv[1], f"trace-{rank}-of-{world}.json"))
if world > 1:
    dist.destroy_process_group()
"""


def _env() -> dict[str, str]:
    env = dict(os.environ, KINETO_LOG_LEVEL="6", OMP_NUM_THREADS="1")
    env.pop("MASTER_ADDR", None)
    env.pop("MASTER_PORT", None)
    return env


@pytest.fixture(scope="module")
def torch_trace(tmp_path_factory) -> Path:
    """A real single-process CPU trace exported by torch.profiler (ProfilerStep#2 and #3)."""
    out = tmp_path_factory.mktemp("torch1")
    script = out / "profile_me.py"
    script.write_text(PROFILE_SCRIPT)
    subprocess.run([sys.executable, str(script), str(out)], check=True, env=_env(), timeout=120)
    return out / "trace-0-of-1.json"


def _raw_events(path: Path) -> list[dict]:
    with open(path) as fh:
        doc = json.load(fh, parse_float=Decimal)  # exact decimals, the test's own reading
    return doc, [e for e in doc["traceEvents"] if e.get("ph") in ("X", "i")]


def test_real_cpu_trace_loads_every_event_with_exact_ns(torch_trace):
    doc, events = _raw_events(torch_trace)
    df = load(torch_trace)
    check_table(df)
    assert len(df) == len(events)
    base = int(doc["baseTimeNanoseconds"])
    expected_ts = sorted(base + int((Decimal(e["ts"]) * 1000).to_integral_value()) for e in events)
    assert sorted(df.ts_ns.tolist()) == expected_ts
    expected_dur = sorted(
        int((Decimal(e.get("dur", 0)) * 1000).to_integral_value()) for e in events
    )
    assert sorted(df.dur_ns.tolist()) == expected_dur
    # the schedule records steps 2 and 3; each op inside them carries its step number
    assert set(df.step) == {-1, 2, 3} or set(df.step) == {2, 3}
    mm = df[df.name == "aten::addmm"]
    assert len(mm) == 2 and sorted(mm.step) == [2, 3]
    assert set(df.track) <= {"cpu", "instant"}
    assert df.attrs["ranks"][0]["world_size"] == 1  # from the file name -0-of-1
    assert df.attrs["ranks"][0]["rank_source"] == "file name"


def test_two_gloo_ranks_by_mpiexec_load_in_parallel(tmp_path, mpiexec):
    script = tmp_path / "profile_me.py"
    script.write_text(PROFILE_SCRIPT)
    env = _env()
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(29500 + os.getpid() % 1000))
    cmd = [mpiexec, "-n", "2", sys.executable, str(script), str(tmp_path)]
    subprocess.run(cmd, check=True, env=env, timeout=180)
    df = load(tmp_path, workers=2)
    check_table(df)
    assert sorted(df.attrs["ranks"]) == [0, 1]
    for rank in (0, 1):
        meta = df.attrs["ranks"][rank]
        assert (meta["world_size"], meta["backend"], meta["rank_source"]) == (
            2,
            "gloo",
            "distributedInfo",
        )
        _doc, events = _raw_events(tmp_path / f"trace-{rank}-of-2.json")
        assert (df["rank"] == rank).sum() == len(events)
    # gloo's all_reduce is communication on both ranks, inside the recorded steps
    comm = df[df.track == "comm"]
    assert set(comm["rank"]) == {0, 1}
    assert any(n.startswith("gloo:all_reduce") for n in comm.name.astype(str))
    assert set(comm.step) <= {-1, 2, 3} and (comm.step >= 2).any()


def test_kineto_xpu_layout_fixture():
    df = load(FIXTURES / "kineto_xpu-1-of-2.json", cache=False)
    check_table(df)
    meta = df.attrs["ranks"][1]
    assert (meta["world_size"], meta["backend"], meta["format"]) == (2, "xccl", "kineto")
    rows = df.set_index("name")
    assert rows.loc["gemm_kernel", "track"] == "gpu"
    assert rows.loc["gemm_kernel", "stream"] == 3  # the SYCL queue
    assert rows.loc["oneccl_allreduce_kernel_bf16", "track"] == "comm"
    assert rows.loc["c10d::allreduce_", "track"] == "comm"
    assert rows.loc["Memcpy M2D", "track"] == "memcpy"
    assert set(rows.loc["urEnqueueKernelLaunch", "track"]) == {"runtime"}
    # the kernel starts after the step ends, but belongs to step 2 through its launch
    assert rows.loc["gemm_kernel", "ts_ns"] == 1790000000000000000 + 1_105_333
    assert rows.loc["gemm_kernel", "step"] == 2
    assert rows.loc["[memory]", "track"] == "instant"


def test_unitrace_layout_fixture_exact_epoch_ns():
    df = load(FIXTURES / "myapp.4321.1.json", cache=False)
    check_table(df)
    meta = df.attrs["ranks"][1]
    assert (meta["format"], meta["rank_source"]) == ("unitrace", "file name")
    rows = df.set_index("name")
    gemm = rows.loc["gemm_kernel[SIMD32 {128; 1; 1} {16; 1; 1}]"]
    assert (gemm["track"], gemm["device"], gemm["stream"], gemm["step"]) == ("gpu", 0, 2, 5)
    assert gemm["ts_ns"] == 1790000000123470001  # epoch µs with decimals, exact to the ns
    assert rows.loc["ProfilerStep#5", "ts_ns"] == 1790000000123456250
    assert rows.loc["zeCommandListAppendMemoryCopy(M2D)[4096]", "track"] == "memcpy"
    assert rows.loc["zeCommandListAppendLaunchKernel", "track"] == "runtime"
    assert rows.loc["MPI_Barrier", "track"] == "comm"


def test_unitrace_rank_from_process_names(tmp_path):
    shutil.copy(FIXTURES / "myapp.4321.1.json", tmp_path / "trace.json")
    df = load_file(tmp_path / "trace.json")
    assert list(df.attrs["ranks"]) == [1]
    assert df.attrs["ranks"][1]["rank_source"] == "process names"


def test_two_files_claiming_one_rank_is_an_error_naming_both(tmp_path):
    for name in ("a-1-of-2.json", "b-1-of-2.json"):
        shutil.copy(FIXTURES / "kineto_xpu-1-of-2.json", tmp_path / name)
    with pytest.raises(TraceFormatError, match=r"rank 1: .*a-1-of-2\.json and .*b-1-of-2\.json"):
        load(tmp_path, workers=1)


def test_no_rank_anywhere_warns_and_takes_rank_0(tmp_path):
    shutil.copy(FIXTURES / "string_pids.json", tmp_path / "trace.json")
    with pytest.warns(UserWarning, match="taken as rank 0"):
        df = load(tmp_path / "trace.json", cache=False)
    assert set(df["rank"]) == {0}


def test_glob_and_missing_paths(tmp_path):
    shutil.copy(FIXTURES / "kineto_xpu-1-of-2.json", tmp_path / "x-1-of-2.json")
    shutil.copy(FIXTURES / "myapp.4321.1.json", tmp_path / "myapp.4321.0.json")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # neither file deserves a warning
        df = load(str(tmp_path / "*.json"), workers=1)
    assert sorted(df.attrs["ranks"]) == [0, 1]
    assert df.name.dtype == "category" and "gemm_kernel" in set(df.name)
    with pytest.raises(TraceFormatError, match="no trace files at"):
        load(tmp_path / "nothing-here-*.json")


def test_a_list_of_paths_loads_each_file_once(tmp_path):
    one, two = tmp_path / "a", tmp_path / "b"
    one.mkdir()
    two.mkdir()
    shutil.copy(FIXTURES / "kineto_xpu-1-of-2.json", one / "x-1-of-2.json")
    shutil.copy(FIXTURES / "myapp.4321.1.json", two / "myapp.4321.0.json")
    df = load([one, str(two / "*.json"), one / "x-1-of-2.json"], workers=1, cache=False)
    assert sorted(df.attrs["ranks"]) == [0, 1]
    assert len(df) == len(load(one, cache=False)) + len(load(two, cache=False))
    with pytest.raises(TraceFormatError, match="no trace files at .*missing"):
        load([one, tmp_path / "missing"])
    with pytest.raises(TraceFormatError, match="list of paths is empty"):
        load([])


def test_comm_patterns_are_extendable(tmp_path):
    path = FIXTURES / "kineto_xpu-1-of-2.json"
    df = load(path, cache=False, comm_patterns=[("mine", r"^gemm_")])
    assert df.set_index("name").loc["gemm_kernel", "track"] == "comm"
    assert df.set_index("name").loc["oneccl_allreduce_kernel_bf16", "track"] == "gpu"
    assert classify_comm("ncclKernel_AllGather_RING_LL_Sum_int8_t") == "nccl"
    assert classify_comm("aten::mm") is None


def test_relative_ts_beyond_float64_keeps_every_nanosecond(tmp_path):
    # Kineto >= 2.4 writes µs relative to baseTimeNanoseconds; past 2**43 µs (about 102 days
    # after the base) a float64 step exceeds 1 ns, so such times must be read as text.
    path = tmp_path / "late-0-of-1.json"
    path.write_text(
        '{"schemaVersion": 1, "baseTimeNanoseconds": 1700000000000000000, "traceEvents": [\n'
        '{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,'
        ' "ts": 9007199254740.993, "dur": 1.001},\n'
        '{"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1,'
        ' "ts": 8796093022208.001, "dur": 2.5}]}'
    )
    df = load(path, cache=False)
    base = 1_700_000_000_000_000_000
    assert df.ts_ns.tolist() == [base + 9_007_199_254_740_993, base + 8_796_093_022_208_001]
    assert df.dur_ns.tolist() == [1001, 2500]


def test_sycl_queues_after_many_cuda_slices_still_become_streams(tmp_path):
    # the parser skips the SYCL-queue pass over slices that never mention one: queues that
    # first appear megabytes in, or only in an escaped key, must still be read
    cuda = (
        '{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": %d.5, "dur": 1.0,'
        ' "args": {"correlation": %d, "device": 0, "stream": 7}}'
    )
    xpu = [
        '{"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 1, "ts": 1.0, "dur": 1.0,'
        ' "args": {"correlation": 1, "device": 0, "sycl queue": 5}}',
        '{"ph": "X", "cat": "kernel", "name": "gemm2", "pid": 0, "tid": 1, "ts": 2.0, "dur": 1.0,'
        ' "args": {"correlation": 2, "device": 0, "sycl\\u0020queue": 6}}',
        '{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 3.0,'
        ' "dur": 1.0}',
    ]
    events = [cuda % (10 + i, 10 + i) for i in range(30_000)] + xpu  # about 4 MB
    path = tmp_path / "mixed-0-of-1.json"
    path.write_text('{"traceEvents": [\n' + ",\n".join(events) + "\n]}")
    df = load(path, cache=False).set_index("name")
    assert (df.loc["gemm", "stream"], df.loc["gemm2", "stream"]) == (5, 6)
    assert df.loc["aten::mm", "stream"] == -1
    assert set(df.loc["k", "stream"]) == {7} and len(df.loc["k"]) == 30_000


def test_ranks_that_record_other_devices_are_two_runs(tmp_path):
    # a world-2 A100 rank and a world-2 V100 rank: same world size, another machine
    for rank, gpu in ((0, "NVIDIA A100-SXM4-40GB"), (1, "Tesla V100-SXM2-32GB")):
        events = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
                   "ts": 10, "dur": 5}]  # fmt: skip
        head = {"distributedInfo": {"rank": rank, "world_size": 2},
                "deviceProperties": [{"id": 0, "name": gpu}], "traceEvents": events}  # fmt: skip
        (tmp_path / f"t-{rank}-of-2.json").write_text(json.dumps(head))
    with pytest.raises(TraceFormatError, match=r"they record different devices \(NVIDIA A100-SXM4-40GB "
                       r"against Tesla V100-SXM2-32GB\)"):  # fmt: skip
        load(tmp_path, cache=False, workers=1)
    (tmp_path / "t-1-of-2.json").unlink()  # one run alone loads
    assert sorted(load(tmp_path, cache=False).attrs["ranks"]) == [0]
