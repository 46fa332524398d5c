"""Write a synthetic Kineto-layout chrome trace (the layout torch 2.13 writes) of a chosen size.

The layout follows what ``torch.profiler`` exports on a CUDA node: a header with
``deviceProperties`` and ``distributedInfo``, ``traceEvents`` in Kineto's pretty-printed
form (cpu_op, cuda_runtime launches, kernels with correlation ids, memcpy, NCCL kernels,
``ac2g`` flows, ``ProfilerStep#N`` spans), with ``baseTimeNanoseconds`` in the header.
Times are µs with ns decimals relative to the base, as Kineto writes them.

With ``--args`` the events also carry the arguments a real CUDA run writes with
``record_shapes=True``: ``Input Dims`` and ``Input type`` on the ops, ``grid`` and ``block``
on the kernels, ``bytes`` on the copies, and the collective's name, message elements, dtype
and group size on the NCCL kernels. Without it (the default, and every figure measured before
it existed) they carry only their ids.

With ``--memory`` the ops also allocate and free, as a run with ``profile_memory=True`` (the
kit's default, and the guides') records them: a ``[memory]`` instant event, in Kineto's layout,
after about two ops in three (a CPU run of the train example writes 0.63 per op, an H100 eager
run 0.28), host and device allocations alike.

Example (about 2 MB, 11 k events)::

    python benchmarks/make_synthetic_trace.py /tmp/synthetic-0-of-2.json --mb 2 --rank 0 --world 2
    python benchmarks/make_synthetic_trace.py /tmp/args-0-of-1.json --mb 2 --args --memory
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path

BASE_NS = 1_735_632_360_000_000_000
OPS = ["aten::mm", "aten::add", "aten::relu", "aten::linear", "aten::layer_norm", "aten::softmax"]
KERNELS = [
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>(Params)",
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float> >(int, float*)",
    "void at::native::(anonymous namespace)::layer_norm_kernel<float>(long, float const*, float*)",
    "void at::native::softmax_warp_forward<float, float, float, 9, false>(float*, float const*, int)",
]
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"

HEADER = """{{
  "schemaVersion": 1,
  "deviceProperties": [
    {{
      "id": 0, "name": "NVIDIA A100-SXM4-40GB", "totalGlobalMem": 42314694656,
      "computeMajor": 8, "computeMinor": 0, "numSms": 108
    }}
  ],
  "distributedInfo": {{"backend": "nccl", "rank": {rank}, "world_size": {world}, "pg_count": 1}},
  "record_shapes": 1,
  "with_stack": 0,
  "displayTimeUnit": "ms",
  "baseTimeNanoseconds": {base},
  "traceEvents": [
"""

TRAILER = """  {{
    "name": "Record Window End", "ph": "i", "s": "g",
    "pid": "", "tid": "", "ts": {end:.3f}
  }}
  ],
  "traceName": "synthetic-{rank}-of-{world}.json"
}}"""

CPU = """  {{
    "ph": "X", "cat": "{cat}", "name": "{name}", "pid": 4242, "tid": 4242,
    "ts": {ts:.3f}, "dur": {dur:.3f},
    "args": {{
      "External id": {ext},"Record function id": 0, "Ev Idx": {idx}{extra}
    }}
  }},
"""
RUNTIME = """  {{
    "ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 4242, "tid": 4242,
    "ts": {ts:.3f}, "dur": {dur:.3f},
    "args": {{
      "External id": {ext}, "cbid": 211, "correlation": {corr}
    }}
  }},
"""
KERNEL = """  {{
    "ph": "X", "cat": "{cat}", "name": "{name}", "pid": 0, "tid": {stream},
    "ts": {ts:.3f}, "dur": {dur:.3f},
    "args": {{
      "External id": {ext}, "device": 0, "stream": {stream}, "correlation": {corr}{extra}
    }}
  }},
"""
FLOW = """  {{
    "ph": "{ph}", "id": {corr}, "pid": {pid}, "tid": {tid}, "ts": {ts:.3f},
    "cat": "ac2g", "name": "ac2g"{bp}
  }},
"""

MEMORY = """  {{
    "ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",
    "pid": 4242, "tid": 4242,
    "ts": {ts:.3f},
    "args": {{
      "Total Reserved": {reserved}, "Total Allocated": {total}, "Bytes": {nbytes}, "Device Id": {dev}, "Device Type": {dtype}, "Addr": {addr}, "finished": false, "Ev Idx": {idx}
    }}
  }},
"""

# the arguments of --args, as Kineto writes them
OP_ARGS = """, "Input Dims": [[512, 1024], [1024, 1024]], "Input type": ["float", "float"],
      "Input Strides": [[1024, 1], [1024, 1]], "Concrete Inputs": ["", ""]"""
KERNEL_ARGS = """, "registers per thread": 64, "shared memory": 0, "blocks per SM": 1.5,
      "warps per SM": 12.0, "grid": [{grid}, 1, 1], "block": [256, 1, 1],
      "est. achieved occupancy %": 19"""
COPY_ARGS = """, "bytes": {nbytes}, "memory bandwidth (GB/s)": 12.5"""
NCCL_ARGS = """, "Collective name": "allreduce", "In msg nelems": {elems},
      "Out msg nelems": {elems}, "Group size": {world}, "dtype": "Float",
      "In split size": "[]", "Out split size": "[]", "Process Group Name": "0",
      "Process Group Description": "default_pg", "grid": [32, 1, 1], "block": [640, 1, 1]"""


def _kernel_args(rng: random.Random, kcat: str, comm: bool, world: int) -> str:
    """The arguments of one device event under --args."""
    if kcat == "gpu_memcpy":
        return COPY_ARGS.format(nbytes=rng.choice((4096, 1 << 20, 64 << 20)))
    if comm:
        return NCCL_ARGS.format(elems=rng.choice((1 << 10, 1 << 20, 25 << 20)), world=world)
    return KERNEL_ARGS.format(grid=rng.choice((80, 432, 2400)))


def _memory_event(rng: random.Random, live: list[tuple[int, int, int]], ts: float, idx: int,
                  totals: dict[int, int]) -> str:  # fmt: skip
    """One allocation, or a free of a live block (about half of them), on the host or the
    device, with the running totals Kineto writes."""
    if live and rng.random() < 0.5:
        addr, nbytes, dev = live.pop(rng.randrange(len(live)))
        nbytes = -nbytes
    else:
        dev = rng.choice((-1, 0))
        addr, nbytes = rng.randrange(1 << 40, 1 << 47), rng.choice((64, 4096, 1 << 20, 8 << 20))
        live.append((addr, nbytes, dev))
    totals[dev] = totals.get(dev, 0) + nbytes
    reserved = 0 if dev < 0 else max(totals[dev], 64 << 20)
    return MEMORY.format(ts=ts, reserved=reserved, total=totals[dev], nbytes=nbytes, dev=dev,
                         dtype=0 if dev < 0 else 1, addr=addr, idx=idx)  # fmt: skip


def write_trace(
    path: Path,
    mb: float,
    rank: int = 0,
    world: int = 1,
    seed: int = 0,
    args: bool = False,
    memory: bool = False,
) -> int:
    """Write the trace and return the number of traceEvents (all phases); ``args``: with
    the arguments a real run writes, ``memory``: with its ``[memory]`` events (see above)."""
    rng = random.Random(seed + rank)
    live: list[tuple[int, int, int]] = []
    totals: dict[int, int] = {}
    target = int(mb * 1024 * 1024)
    t = 1_000_000.0 + rank * 3.217  # µs since base; ranks start a little apart
    corr = ext = idx = events = step = 0
    with open(path, "w") as out:
        out.write(HEADER.format(rank=rank, world=world, base=BASE_NS))
        written = 0
        while written < target:
            parts = []
            step_start = t
            body = []
            for _op in range(40):
                ext += 1
                corr += 1
                idx += 1
                name = rng.choice(OPS)
                dur = rng.uniform(5, 50)
                extra = OP_ARGS if args else ""
                body.append(
                    CPU.format(
                        cat="cpu_op", name=name, ts=t, dur=dur, ext=ext, idx=idx, extra=extra
                    )
                )
                body.append(RUNTIME.format(ts=t + 1.5, dur=4.125, ext=ext, corr=corr))
                comm = rng.random() < 0.1
                kname, stream = (NCCL, 20) if comm else (rng.choice(KERNELS), 7)
                kts = t + 6.25 + rng.uniform(0, 3)
                kcat = "gpu_memcpy" if rng.random() < 0.05 else "kernel"
                if kcat == "gpu_memcpy":
                    kname = "Memcpy HtoD (Pageable -> Device)"
                extra = _kernel_args(rng, kcat, comm, world) if args else ""
                body.append(
                    KERNEL.format(
                        cat=kcat,
                        name=kname,
                        stream=stream,
                        ts=kts,
                        dur=dur * 0.8,
                        ext=ext,
                        corr=corr,
                        extra=extra,
                    )
                )
                body.append(FLOW.format(ph="s", corr=corr, pid=4242, tid=4242, ts=t + 1.5, bp=""))
                body.append(
                    FLOW.format(ph="f", corr=corr, pid=0, tid=stream, ts=kts, bp=', "bp": "e"')
                )
                events += 5
                if memory and rng.random() < 0.63:
                    idx += 1
                    body.append(_memory_event(rng, live, t + dur * 0.5, idx, totals))
                    events += 1
                t += dur + rng.uniform(0.5, 2.0)
            ext += 1
            parts.append(
                CPU.format(
                    cat="user_annotation",
                    name=f"ProfilerStep#{step}",
                    ts=step_start,
                    dur=t - step_start,
                    ext=ext,
                    idx=idx,
                    extra="",
                )
            )
            parts.extend(body)
            chunk = "".join(parts)
            out.write(chunk)
            written += len(chunk)
            events += 1
            step += 1
            t += 10.0
        out.write(TRAILER.format(end=t, rank=rank, world=world))
    return events + 1


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path", type=Path)
    parser.add_argument("--mb", type=float, default=200.0, help="approximate size in MiB")
    parser.add_argument("--rank", type=int, default=0)
    parser.add_argument("--world", type=int, default=1)
    parser.add_argument(
        "--args", action="store_true", help="write the arguments a real run has (see above)"
    )
    parser.add_argument(
        "--memory", action="store_true", help="write the [memory] events of profile_memory=True"
    )
    args = parser.parse_args(argv)
    n = write_trace(args.path, args.mb, args.rank, args.world, args=args.args, memory=args.memory)
    print(f"wrote {args.path.name}: {args.path.stat().st_size / 1e6:.1f} MB, {n} events")


if __name__ == "__main__":
    main()
