"""Record the pathologies app on a GPU node, one run per problem, as the diagnosis corpus's
real traces (tests/fixtures/traces/gpu_pathologies/)::

    python benchmarks/record_gpu_pathologies.py OUT [--device cuda] [--only KIND,...]

Each case is the app with one problem (``none``: the fixed run), profiled for 7 steps after one
warm-up step, into ``OUT/<case>/``: the gzipped torch.profiler trace of every rank, the app's
stdout and per-rank step times. One GPU is enough:

- the one-rank cases run as one process (the node's backend, a world of 1: no collective
  kernel, so the traces hold only what the problem made);
- ``straggler`` needs two ranks: they share the one GPU with the ``gloo`` backend (NCCL refuses
  two ranks on one device), each started as torchrun would, with ``LOCAL_RANK=0``; so do the
  patterns across steps and ranks: ``periodic_save`` (the state dict copied to the host and
  written every third step, on every rank), ``host_stall`` (a garbage-collector pause on the
  last rank in step 4), ``rotating_straggler`` (a larger batch on rank ``step mod 2``), and
  ``patterns``, the three at once.

The collective kinds (``small_collectives``, ``low_bus_bandwidth``, ``exposed_communication``)
need two GPUs and NCCL, and are not recorded here. ``OUT/cases.json`` lists what ran, with the
exit codes and seconds, for the tests to read.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

PROFILE = ["--profile", "--prof-wait", "0", "--prof-warmup", "1", "--prof-active", "7",
           "--prof-repeat", "1", "--trace-gzip", "--record-shapes"]  # fmt: skip
# case -> (ranks, the app's flags); sizes chosen so each effect is several ms a step on an H100
CASES: dict[str, tuple[int, list[str]]] = {
    "none": (1, ["--problem", "none"]),
    "data_loading": (1, ["--problem", "data_loading", "--loader-ms", "15"]),
    "synchronize_in_step": (1, ["--problem", "synchronize_in_step", "--log-ms", "8"]),
    "launch_bound": (1, ["--problem", "launch_bound", "--tiny-ops", "400"]),
    "allocator_churn": (1, ["--problem", "allocator_churn", "--churn-mb", "256"]),
    "pageable_copy": (1, ["--problem", "pageable_copy", "--copy-mb", "64"]),
    "sync_copy": (1, ["--problem", "sync_copy", "--copy-mb", "64"]),
    "no_tensor_cores": (1, ["--problem", "no_tensor_cores"]),
    "straggler": (2, ["--problem", "straggler", "--slow-ms", "25", "--backend", "gloo"]),
    "straggler_none": (2, ["--problem", "none", "--backend", "gloo"]),
    # the patterns across steps and ranks: slow steps on every rank, a host stall on one rank
    # in one step, a slow rank that changes every step
    "periodic_save": (2, ["--problem", "periodic_save", "--save-mb", "64", "--backend", "gloo"]),
    "host_stall": (2, ["--problem", "host_stall", "--stall-ms", "60", "--backend", "gloo"]),
    "rotating_straggler": (2, ["--problem", "rotating_straggler", "--backend", "gloo"]),
    "patterns": (
        2,
        ["--problem", "periodic_save,host_stall,rotating_straggler", "--backend", "gloo"],
    ),
    # the unseen run, on one GPU: three problems at once
    "unseen": (
        2,
        [
            "--problem",
            "pageable_copy,synchronize_in_step,straggler",
            "--slow-ms",
            "25",
            "--backend",
            "gloo",
        ],
    ),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_case(name: str, out: Path, device: str) -> dict:
    """Run one case into ``out/name``; its exit codes, seconds and the files it wrote."""
    ranks, flags = CASES[name]
    run_dir = out / name
    run_dir.mkdir(parents=True)  # never into an existing run
    base = {k: v for k, v in os.environ.items()
            if not k.startswith(("PMI_", "OMPI_", "PMIX_", "SLURM_", "PALS_"))}  # fmt: skip
    base.update(HPCPROF_RUN_DIR=str(run_dir), PYTHONUNBUFFERED="1")
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        base.pop(key, None)
    port = str(free_port())
    cmd = [sys.executable, "-m", "hpcprof_kit.apps.pathologies", "--device", device,
           "--steps", "8", "--timeout-s", "60", *flags, *PROFILE]  # fmt: skip
    started = time.perf_counter()
    procs = []
    for rank in range(ranks):
        env = dict(base)
        if ranks > 1:  # as torchrun sets them; both ranks on the node's one GPU
            env.update(RANK=str(rank), WORLD_SIZE=str(ranks), LOCAL_RANK="0",
                       LOCAL_WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=port)  # fmt: skip
        log = (run_dir / f"stdout-{rank}.txt").open("w")
        procs.append((subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT), log))
    codes = []
    for proc, log in procs:
        try:
            codes.append(proc.wait(timeout=120))
        except subprocess.TimeoutExpired:
            proc.kill()
            codes.append(-9)
        log.close()
    seconds = round(time.perf_counter() - started, 1)
    files = sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*") if p.is_file())
    return {"case": name, "ranks": ranks, "flags": flags + PROFILE, "exit": codes,
            "seconds": seconds, "files": files}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out", type=Path)
    p.add_argument("--device", default="cuda")
    p.add_argument("--only", default="", help="comma-separated cases (default: all)")
    args = p.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or list(CASES)
    unknown = sorted(set(names) - set(CASES))
    if unknown:
        p.error(f"--only {args.only!r}: {', '.join(unknown)} unknown; pick from {', '.join(CASES)}")
    if args.out.exists() and any(args.out.iterdir()):
        p.error(f"{args.out} is not empty: record into a fresh folder")
    args.out.mkdir(parents=True, exist_ok=True)
    done = []
    for name in names:
        result = run_case(name, args.out, args.device)
        done.append(result)
        print(json.dumps(result), flush=True)
        if any(result["exit"]):
            log = args.out / name / "stdout-0.txt"
            print(log.read_text()[-3000:], flush=True)
    (args.out / "cases.json").write_text(json.dumps(done, indent=1))
    shutil.copy(__file__, args.out / "record_gpu_pathologies.py")
    return 0 if all(not any(r["exit"]) for r in done) else 1


if __name__ == "__main__":
    raise SystemExit(main())
