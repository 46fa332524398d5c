"""Misreadings of real traces (issue 47), each on a small Kineto trace of its shape: the
finding a user reads, with the number it states, as the raw events say it should be.

Every trace here is written by hand in µs (the events' own unit), so each expected number
is worked from the events listed, not from a run of the kit.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from hpcprof_kit import traces
from hpcprof_kit.traces.findings import find
from hpcprof_kit.traces.view.run_view import RunView

PID, HOST, STREAM, COMM_STREAM = 1, 1, 7, 20


def x(cat: str, name: str, ts: float, dur: float, tid: int = HOST, **args) -> dict:
    """A complete event; a device event (``stream`` given) on the device's pid and stream."""
    on_device = "stream" in args
    if on_device:
        args = {"device": 0, **args}
    return {"ph": "X", "cat": cat, "name": name, "pid": 0 if on_device else PID,
            "tid": args["stream"] if on_device else tid, "ts": ts, "dur": dur,
            "args": args}  # fmt: skip


def write(folder: Path, events: list[dict], **meta) -> Path:
    path = folder / "trace-0-of-1.json"
    doc = {"traceEvents": events, "distributedInfo": {"rank": 0, "world_size": 1}, **meta}
    path.write_text(json.dumps(doc))
    return path


def findings(path: Path) -> tuple[dict[str, dict], dict[str, str]]:
    """The findings by kind, and the rules that did not run with why."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        found = find(RunView.of(traces.load(path, cache=False)))
    return {f["kind"]: f for f in found}, found.coverage


# --- launch_bound: a gap another stream filled is no idle ----------------------------------

STEP_US, STEPS, TINY, EVERY = 3000, 6, 100, 15


def launch_paced_steps(collective_us: float) -> list[dict]:
    """Six 3 ms steps. In each, 100 tiny kernels of 5 µs on stream 7, one every 15 µs from
    100 µs into the step, each launched 2 µs before it starts: 99 gaps of 10 µs, 0.99 ms of
    launch pacing on their stream. An NCCL kernel on stream 20 runs from the first tiny
    kernel for ``collective_us``: the gaps inside it leave the device busy."""
    events, corr = [], 0
    for k in range(STEPS):
        t0 = k * STEP_US
        events.append(x("user_annotation", f"ProfilerStep#{k}", t0, STEP_US))
        for i in range(TINY):
            corr += 1
            at = t0 + 100 + i * EVERY
            events += [x("cuda_runtime", "cudaLaunchKernel", at - 3, 1, correlation=corr),
                       x("kernel", "tiny_elementwise_kernel", at, 5, stream=STREAM,
                         correlation=corr)]  # fmt: skip
        if collective_us:
            corr += 1
            events += [x("cuda_runtime", "cudaLaunchKernel", t0 + 90, 2, correlation=corr),
                       x("kernel", "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)",
                         t0 + 100, collective_us, stream=COMM_STREAM, correlation=corr)]  # fmt: skip
    return events


def test_launch_bound_counts_the_whole_gap_when_no_other_stream_runs(tmp_path):
    found, _ = findings(write(tmp_path, launch_paced_steps(0)))
    f = found["launch_bound"]
    assert f["gain_ms_per_step"] == pytest.approx(0.99)  # 99 gaps of 10 µs
    assert f["evidence"]["tiny_kernels_per_step"] == 99
    assert f["value"] == pytest.approx(100 * 0.99 / 3, abs=1e-3)


def test_launch_bound_counts_no_gap_a_collective_filled(tmp_path):
    """The all-reduce covers the first 50 gaps (it ends as the 51st kernel starts): only the
    49 gaps after it are the device's idle, 0.49 ms a step, not 0.99."""
    found, _ = findings(write(tmp_path, launch_paced_steps(750)))
    f = found["launch_bound"]
    assert f["gain_ms_per_step"] == pytest.approx(0.49)
    assert f["evidence"]["tiny_kernels_per_step"] == 49
    assert "0.5 ms" in f["summary"]


def test_launch_bound_is_silent_when_a_collective_runs_through_every_gap(tmp_path):
    found, _ = findings(write(tmp_path, launch_paced_steps(99 * EVERY + 5)))
    assert "launch_bound" not in found


def test_launch_bound_never_claims_more_than_the_steps_device_idle(tmp_path):
    """A copy on a third stream runs from 600 µs into each step to its end: the device idles
    only in the step's first 600 µs, 430 µs of them (34 tiny kernels run there). All of it
    is before a tiny kernel (100 µs before the first, then 33 gaps of 10 µs): the launches
    cost 0.43 ms a step, not the 0.99 ms their own stream shows."""
    events = launch_paced_steps(0)
    for k in range(STEPS):
        events.append(x("gpu_memcpy", "Memcpy DtoD (Device -> Device)", k * STEP_US + 600,
                        STEP_US - 600, stream=30, correlation=10_000 + k))  # fmt: skip
    path = write(tmp_path, events)
    found, _ = findings(path)
    view = RunView.of(traces.load(path, cache=False))
    idle_ms = float((view.rows["host_ns"] + view.rows["idle_ns"]).median()) / 1e6
    assert idle_ms == pytest.approx(0.43)
    f = found["launch_bound"]
    assert f["gain_ms_per_step"] == pytest.approx(0.43)
    assert f["gain_ms_per_step"] <= idle_ms


# --- sync_copy: a tiny device-to-host copy named by the host's wait ------------------------

STEP10 = 10_000  # µs


def blocking_copy_steps(how: str, wait_us: float = 5890, then_us: float = 500) -> list[dict]:
    """Six 10 ms steps. A 6 ms GEMM runs from 20 µs into the step; from 100 µs the host
    reads a small device tensor (``how``): ``item`` (``aten::item`` > ``_local_scalar_dense``
    > ``cudaMemcpyAsync``, then ``cudaStreamSynchronize``) or ``cpu`` (``aten::to`` >
    ``aten::copy_`` > a synchronous ``cudaMemcpy`` of 704 bytes). Its 2 µs copy runs after
    the GEMM, and the host's wait ends with it: ``wait_us`` µs held. The host launches the
    next kernel ``then_us`` after the wait: the device idles from the copy's end until then."""
    events, corr = [], 100
    for k in range(STEPS):
        t0 = k * STEP10
        copy_at = t0 + 110 + wait_us - 3  # the copy ends 1 µs before the wait does
        done = t0 + 110 + wait_us
        events += [x("user_annotation", f"ProfilerStep#{k}", t0, STEP10),
                   x("cuda_runtime", "cudaLaunchKernel", t0 + 10, 5, correlation=corr),
                   x("kernel", "sgemm_128x64_nn", t0 + 20, copy_at - t0 - 20, stream=STREAM,
                     correlation=corr),
                   x("gpu_memcpy", "Memcpy DtoH (Device -> Pageable)", copy_at, 2,
                     stream=STREAM, correlation=corr + 1, bytes=704)]  # fmt: skip
        if how == "item":
            events += [x("cpu_op", "aten::item", t0 + 100, wait_us + 20),
                       x("cpu_op", "aten::_local_scalar_dense", t0 + 101, wait_us + 18),
                       x("cuda_runtime", "cudaMemcpyAsync", t0 + 102, 5, correlation=corr + 1),
                       x("cuda_runtime", "cudaStreamSynchronize", t0 + 110, wait_us,
                         correlation=corr + 2)]  # fmt: skip
        else:
            events += [x("cpu_op", "aten::to", t0 + 100, wait_us + 20),
                       x("cpu_op", "aten::copy_", t0 + 104, wait_us + 10),
                       x("cuda_runtime", "cudaMemcpy", t0 + 110, wait_us,
                         correlation=corr + 1)]  # fmt: skip
        events += [x("cuda_runtime", "cudaLaunchKernel", done + then_us - 10, 5,
                     correlation=corr + 3),
                   x("kernel", "relu_kernel", done + then_us, 2000, stream=STREAM,
                     correlation=corr + 3)]  # fmt: skip
        corr += 10
    return events


@pytest.mark.parametrize("how, op", [("item", "aten::item"), ("cpu", "aten::to")])
def test_a_tiny_blocking_copy_is_named_by_the_hosts_wait(tmp_path, how, op):
    """The copy takes 2 µs on the device; the host waits 5.89 ms for it (58.9 % of the
    step), and the device then idles 0.1 ms until the next launch (1 % of the step: not
    enough for synchronize_in_step, 5 %)."""
    found, _ = findings(write(tmp_path, blocking_copy_steps(how, then_us=100)))
    f = found["sync_copy"]
    assert f["value"] == pytest.approx(58.9)
    assert f["evidence"]["host_blocked_ms_per_step"] == pytest.approx(5.89)
    assert f["evidence"]["copy_us_median"] == pytest.approx(2.0)
    assert f["evidence"]["called_from"] == {op: {"calls": STEPS, "host_wait_ms": 35.34}}  # 6 x 5.89
    assert f["evidence"]["device_idle_after_ms_per_step"] == pytest.approx(0.1)
    assert f["gain_ms_per_step"] == pytest.approx(0.102)  # the copy (2 µs) and the idle after
    assert f["steps"] == list(range(STEPS))
    assert op in f["summary"] and "5.9 ms" in f["summary"]
    assert "synchronize_in_step" not in found


def test_an_item_synchronize_in_step_named_is_not_named_twice(tmp_path):
    """With 0.5 ms of device idle after each ``.item()`` (5 % of the step) synchronize_in_step
    names its stream sync; sync_copy does not name the same wait again."""
    found, _ = findings(write(tmp_path, blocking_copy_steps("item", then_us=500)))
    assert found["synchronize_in_step"]["gain_ms_per_step"] == pytest.approx(0.5)
    assert "sync_copy" not in found


def test_a_synchronous_cudamemcpy_is_named_whatever_follows(tmp_path):
    """A ``cudaMemcpy`` is no sync synchronize_in_step knows: sync_copy names it, with the
    0.5 ms the device then idles."""
    found, _ = findings(write(tmp_path, blocking_copy_steps("cpu", then_us=500)))
    f = found["sync_copy"]
    assert f["evidence"]["waited_in"] == ["cudaMemcpy"]
    assert f["gain_ms_per_step"] == pytest.approx(0.502)


def test_a_synchronous_cudamemcpy_to_the_device_is_a_sync(tmp_path):
    """The same ``cudaMemcpy`` copying 704 bytes to the device: no copy to the host, but the
    host still waited 5.89 ms for the GEMM queued before it, and the device then idles 1 ms
    until the next launch: 10 % of the step, named by synchronize_in_step."""
    events = blocking_copy_steps("cpu", then_us=1000)
    for e in events:
        if e["name"].startswith("Memcpy DtoH"):
            e["name"] = "Memcpy HtoD (Pageable -> Device)"
    found, _ = findings(write(tmp_path, events))
    f = found["synchronize_in_step"]
    assert f["value"] == pytest.approx(10.0)
    assert f["gain_ms_per_step"] == pytest.approx(1.0)
    assert f["evidence"]["calls"]["cudaMemcpy"]["calls"] == STEPS
    assert f["evidence"]["called_from"] == {"aten::to": STEPS}
    assert "sync_copy" not in found


def test_a_short_wait_for_a_copy_is_no_finding(tmp_path):
    """The same copies with a 30 µs wait: 0.3 % of the step, under the 2 % threshold."""
    found, _ = findings(write(tmp_path, blocking_copy_steps("cpu", wait_us=30)))
    assert "sync_copy" not in found


# --- device runs whose device events are missing are not "CPU-only" ----------------------

A100 = [{"id": i, "name": "NVIDIA A100-SXM4-80GB", "computeMajor": 8, "computeMinor": 0}
        for i in range(8)]  # fmt: skip


def tiny_op_steps(calls: bool = False) -> list[dict]:
    """Six 2 ms steps of 200 ``aten::add_`` of 5 µs each on the host (a loop of tiny ops, 50 %
    of the step); with ``calls``, each op launches its kernel (``cudaLaunchKernel``), and
    the kernels were not recorded (CUPTI's counter profiling keeps no kernel events)."""
    events = []
    for k in range(STEPS):
        t0 = k * 2000
        events.append(x("user_annotation", f"ProfilerStep#{k}", t0, 2000))
        for i in range(200):
            events.append(x("cpu_op", "aten::add_", t0 + 5 + i * 9, 5))
            if calls:
                events.append(x("cuda_runtime", "cudaLaunchKernel", t0 + 6 + i * 9, 2,
                                correlation=k * 1000 + i))  # fmt: skip
    return events


def test_a_cpu_run_gets_cpu_advice(tmp_path):
    found, coverage = findings(write(tmp_path, tiny_op_steps()))
    assert found["launch_bound"]["evidence"]["tiny_ops_per_step"] == 200
    assert "(a CPU-only run)" in coverage["short_kernels"]


@pytest.mark.parametrize(
    "meta, calls, named",
    [
        ({"deviceProperties": A100}, False, "its metadata lists NVIDIA A100-SXM4-80GB"),
        ({"distributedInfo": {"rank": 0, "world_size": 1, "backend": "nccl"}}, False,
         "its collectives' backend is nccl"),
        ({}, True, "its host recorded 1200 device calls: cudaLaunchKernel"),
    ],
)  # fmt: skip
def test_a_device_run_without_device_events_is_not_called_cpu_only(tmp_path, meta, calls,
                                                                   named):  # fmt: skip
    found, coverage = findings(write(tmp_path, tiny_op_steps(calls), **meta))
    assert "launch_bound" not in found  # no "vectorise the loop, foreach=True on the CPU"
    for kind in ("launch_bound", "short_kernels", "synchronize_in_step", "allocator_churn"):
        assert coverage[kind].startswith("could not run: the run used a device (")
        assert named in coverage[kind]
        assert "CPU-only" not in coverage[kind]


# --- the collective read: all-to-all is not all-reduce; sizes wherever the trace holds them -

NCCL_KERNEL = "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)"
A2A_ELEMS, AR_ELEMS = 8 << 20, 65536  # floats: 32 MiB and 256 KiB


def exposed_collective_steps() -> list[dict]:
    """Four 10 ms steps of rank 0 of 8 on A100s: a 4.4 ms compute kernel, then, with
    nothing to hide them, a 3 ms all-to-all of 32 MiB (``record_param_comms`` says its
    size, as TorchRec's input dist writes it) and a 1 ms all-reduce of 256 KiB (the
    ``nccl:all_reduce`` op's ``Input Dims``, as older traces write it). NCCL runs both as
    ``SendRecv`` kernels: only the launching host op says which collective each is."""
    events = []
    for k in range(4):
        t0, c = k * 10_000, 1000 * k
        events += [
            x("user_annotation", f"ProfilerStep#{k}", t0, 10_000),
            x("cuda_runtime", "cudaLaunchKernel", t0 + 10, 5, correlation=c + 1),
            x("kernel", "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn", t0 + 100, 4400,
              stream=STREAM, correlation=c + 1),
            x("cpu_op", "record_param_comms", t0 + 30, 40, **{
                "Collective name": "all_to_all", "In msg nelems": A2A_ELEMS, "dtype": "Float",
                "Group size": 8}),
            x("user_annotation", "nccl:all_to_all", t0 + 40, 20),
            x("cuda_runtime", "cudaLaunchKernel", t0 + 50, 5, correlation=c + 2),
            x("kernel", NCCL_KERNEL, t0 + 4500, 3000, stream=COMM_STREAM, correlation=c + 2),
            x("user_annotation", "nccl:all_reduce", t0 + 75, 15,
              **{"Input Dims": [[AR_ELEMS]], "Input type": ["float"]}),
            x("cuda_runtime", "cudaLaunchKernel", t0 + 80, 5, correlation=c + 3),
            x("kernel", NCCL_KERNEL, t0 + 7500, 1000, stream=COMM_STREAM, correlation=c + 3),
        ]  # fmt: skip
    return events


def test_exposed_all_to_all_gets_all_to_all_advice(tmp_path):
    meta = {"deviceProperties": A100,
            "distributedInfo": {"rank": 0, "world_size": 8, "backend": "nccl"}}  # fmt: skip
    found, _ = findings(write(tmp_path, exposed_collective_steps(), **meta))
    f = found["exposed_communication"]
    assert f["value"] == pytest.approx(40.0)
    assert f["evidence"]["exposed_ms_per_step_by_collective"] == {"alltoall": 3.0,
                                                                  "allreduce": 1.0}  # fmt: skip
    assert f["advice"].startswith("Mostly alltoall (3.0 ms a rank and step")
    assert "TrainPipelineSparseDist" in f["advice"] and "bucket_cap_mb" not in f["advice"]


def test_one_rank_of_eight_is_not_called_every_rank(tmp_path):
    """With one rank of 8 traced, no traced rank is known to arrive last: the summary speaks
    of the rank traced, not of every rank."""
    meta = {"deviceProperties": A100,
            "distributedInfo": {"rank": 0, "world_size": 8, "backend": "nccl"}}  # fmt: skip
    f = findings(write(tmp_path, exposed_collective_steps(), **meta))[0]["exposed_communication"]
    assert f["summary"].startswith("the rank traced waits for communication with nothing to "
                                   "overlap it: 40.0 % of the step (median) (only 1 of 8")  # fmt: skip
    assert "every rank" not in f["summary"]


def test_collectives_in_steps_with_no_traced_work_are_not_called_exposed(tmp_path):
    """Six 10 ms steps holding a gloo all-reduce of 8 ms on its thread and nothing else (a
    sampled trace): 80 % of the step is not 'exposed', nothing says what it could overlap."""
    events = []
    for k in range(6):
        t0 = k * 10_000
        events += [x("user_annotation", f"ProfilerStep#{k}", t0, 10_000),
                   x("user_annotation", "gloo:all_reduce", t0 + 1000, 8000, tid=9)]  # fmt: skip
    found, coverage = findings(write(tmp_path, events))
    assert "exposed_communication" not in found
    assert coverage["exposed_communication"].startswith("could not run: the steps with comm")


def test_message_sizes_are_read_from_the_host_ops_so_bus_bandwidth_is_measured(tmp_path):
    """The 32 MiB all-to-all in 3 ms moves 7/8 of its bytes over each rank's link: 9.8 GB/s
    of bus bandwidth, 4.3 % of the 230 GB/s A100s' links give nccl-tests."""
    meta = {"deviceProperties": A100,
            "distributedInfo": {"rank": 0, "world_size": 8, "backend": "nccl"}}  # fmt: skip
    found, coverage = findings(write(tmp_path, exposed_collective_steps(), **meta))
    assert "small_collectives" not in coverage  # it ran: one small all-reduce a step, under 20
    f = found["low_bus_bandwidth"]
    busbw = A2A_ELEMS * 4 * 7 / 8 / 3e6  # bytes per ns: GB/s
    assert f["evidence"]["bus_bandwidth_gbps"] == pytest.approx(busbw, abs=0.01)
    assert f["value"] == pytest.approx(100 * busbw / 230, abs=1e-3)


# --- no_tensor_cores: the advice follows the GPU's generation; the fp32 share counted whole -

DGRAD = "void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int, int, int, float const*, int, float const*, int, float*)"


def fp32_gemm_steps() -> list[dict]:
    """Four 10 ms steps: a 4 ms ``volta_sgemm`` and a 1 ms cuDNN ``dgrad_engine<float, ...>``
    (fp32 by its template, though no kernel-name pattern says so): 5 ms of GEMMs, all fp32."""
    events = []
    for k in range(4):
        t0, c = k * 10_000, 100 * k
        events += [x("user_annotation", f"ProfilerStep#{k}", t0, 10_000),
                   x("cuda_runtime", "cudaLaunchKernel", t0 + 10, 5, correlation=c + 1),
                   x("kernel", "volta_sgemm_128x64_nn", t0 + 100, 4000, stream=STREAM,
                     correlation=c + 1),
                   x("cuda_runtime", "cudaLaunchKernel", t0 + 20, 5, correlation=c + 2),
                   x("kernel", DGRAD, t0 + 4200, 1000, stream=STREAM, correlation=c + 2)]  # fmt: skip
    return events


V100 = [{"id": 0, "name": "Tesla V100-SXM2-32GB", "computeMajor": 7, "computeMinor": 0}]


def test_on_volta_the_advice_is_fp16_autocast_with_gradscaler_not_tf32(tmp_path):
    found, _ = findings(write(tmp_path, fp32_gemm_steps(), deviceProperties=V100))
    f = found["no_tensor_cores"]
    assert f["value"] == pytest.approx(100.0)  # 5 of 5 ms, not the 4 the names say
    assert f["evidence"]["fp32_gemm_ms_per_step"] == pytest.approx(5.0)
    assert f["gain_ms_per_step"] == pytest.approx(2.5)
    assert "GradScaler" in f["advice"] and "float16" in f["advice"]
    assert "allow_tf32" not in f["advice"] and "bfloat16" not in f["advice"]


def test_from_ampere_on_the_advice_is_tf32_and_bf16(tmp_path):
    found, _ = findings(write(tmp_path, fp32_gemm_steps(), deviceProperties=A100))
    f = found["no_tensor_cores"]
    assert f["evidence"]["generation"] == "bf16 and tf32"
    assert "allow_tf32" in f["advice"] and "bfloat16" in f["advice"]


# --- start-up set apart on a trace without steps -------------------------------------------


def unstepped_run(kernel_us: float) -> list[dict]:
    """No ProfilerStep: the runtime's first ``cudaFree`` holds the host 3 s, a ``cudaMalloc``
    0.1 s, then 100 kernels of ``kernel_us`` run one every 10 ms (1 s of steady state)."""
    events = [x("cuda_runtime", "cudaFree", 0, 3_000_000),
              x("cuda_runtime", "cudaMalloc", 3_000_000, 100_000)]  # fmt: skip
    for i in range(100):
        at = 3_100_000 + i * 10_000
        events += [x("cuda_runtime", "cudaLaunchKernel", at - 100, 5, correlation=i + 1),
                   x("kernel", "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn", at, kernel_us,
                     stream=STREAM, correlation=i + 1)]  # fmt: skip
    return events


def test_start_up_is_no_step_idle_nor_allocator_churn(tmp_path):
    """The steady state idles 5 % (0.5 ms of each 10): under the 10 % threshold. Read as one
    step, the 3.1 s of start-up made it 77 % idle and 76 % allocator churn, "a step"."""
    found, _ = findings(write(tmp_path, unstepped_run(9_500)))
    assert "device_idle_host_bound" not in found
    assert "allocator_churn" not in found
    assert not any("gain_ms_per_step" in f for f in found.values())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        notes = find(RunView.of(traces.load(tmp_path / "trace-0-of-1.json", cache=False))).notes
    assert any(n.startswith("start-up, 3100.0 ms from the trace's start") for n in notes)


def test_the_steady_states_idle_is_named_without_a_gain_per_step(tmp_path):
    """Kernels of 5 ms every 10: the steady state idles 50 % (the last kernel's end closes
    the trace: 99 gaps of 5 ms in 995 ms)."""
    found, _ = findings(write(tmp_path, unstepped_run(5_000)))
    f = found["device_idle_host_bound"]
    assert f["value"] == pytest.approx(100 * 99 * 5 / 995, abs=1e-3)
    assert "of the trace after start-up" in f["summary"] and "3100.0 ms" in f["summary"]
    assert f["evidence"]["longest_startup_call"] == {0: {"name": "cudaFree", "ms": 3000.0}}
    assert "gain_ms_per_step" not in f and "schedule(wait=1, warmup=1, active=3)" in f["advice"]


# --- a cut last step set aside in a two-step trace -----------------------------------------


def two_steps(last_us: float) -> list[dict]:
    """Step 1: 10 ms, a 9.5 ms kernel (the device idles 5 %); step 2: ``last_us`` with no
    device work, the recording's end cutting it."""
    return [x("user_annotation", "ProfilerStep#1", 0, 10_000),
            x("cuda_runtime", "cudaLaunchKernel", 10, 5, correlation=1),
            x("kernel", "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn", 100, 9_500,
              stream=STREAM, correlation=1),
            x("user_annotation", "ProfilerStep#2", 10_000, last_us),
            x("cpu_op", "aten::empty", 10_001, last_us - 2)]  # fmt: skip


def test_a_cut_last_step_of_two_is_set_aside(tmp_path):
    """A 49 µs second step after a 10 ms first: cut, not a step. Counted, the device was idle
    52.5 % of the median step; set aside, 5 %: no finding."""
    path = write(tmp_path, two_steps(49))
    found, _ = findings(path)
    assert "device_idle_host_bound" not in found
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        notes = find(RunView.of(traces.load(path, cache=False))).notes
    assert "rank 0's last step (2) is cut short by the end of the recording: set aside" in notes


def test_a_second_step_shorter_than_a_warm_up_step_stays(tmp_path):
    """A 4 ms second step after a 10 ms first may be the steady state after a warm-up: kept
    (its 100 % idle then counts in the median with the first's 5 %)."""
    found, _ = findings(write(tmp_path, two_steps(4_000)))
    assert found["device_idle_host_bound"]["value"] == pytest.approx((5 + 100) / 2)
