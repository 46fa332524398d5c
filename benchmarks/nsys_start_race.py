"""How often 2-rank nsys runs under Hydra mpiexec fail to start, by where the ranks' nsys lock
their node-wide session registry (nsys 2022.4 keeps it in /dev/shm and locks it through
``$TMPDIR/nvidia``). Not one of run_all's benchmarks: it needs nsys and takes minutes.

    python benchmarks/nsys_start_race.py job 40        # one TMPDIR for the job's ranks
    python benchmarks/nsys_start_race.py per-rank 40   # a TMPDIR (and lock) per rank
    python benchmarks/nsys_start_race.py kit 40        # the kit's wrapper: a TMPDIR per
                                                             # rank, the node's lock folder
    stress-ng --cpu 2 & python benchmarks/nsys_start_race.py kit 40   # under load

Each run: a short Python app traced on both ranks (``--trace=osrt,nvtx``, no sampling), in its
own process group, in a fresh folder. A run that does not end in ``--timeout`` seconds is a hang:
the launcher and this run's agents (found by their TMPDIR) are ended. One JSON line at the end:
runs that ended well, hangs and failures, each with the message nsys gave. After a hang, every
later nsys on the machine may hang too (the registry stays locked); that is printed as it is
seen, and the registry must then be removed by hand once nothing else runs nsys.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil

MESSAGES = ("Local Endpoint is not available", "Agent launcher failed", "sem_open", "End of file")
APP = "import time\nsum(i * i for i in range(10000))\ntime.sleep(0.02)\n"
PER_RANK = 'export TMPDIR="$BASE/tmp/rank$PMI_RANK"; mkdir -p "$TMPDIR"; exec "$@"\n'


def _end_agents(folder: Path) -> None:
    for proc in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            mine = proc.environ().get("TMPDIR", "").startswith(str(folder))
            if "--start-agent" in (proc.info["cmdline"] or []) and mine:
                proc.terminate()


def _command(mode: str, folder: Path, env: dict[str, str]) -> list[str]:
    mpiexec = str(Path(sys.executable).parent / "mpiexec")
    (folder / "app.py").write_text(APP)
    app = [sys.executable, str(folder / "app.py")]
    nsys = ["nsys", "profile", "--trace=osrt,nvtx", "--sample=none", "--cpuctxsw=none",
            "-o", str(folder / "rep_%q{PMI_RANK}"), "-f", "true"]  # fmt: skip
    if mode == "job":
        env["TMPDIR"] = str(folder)
        return [mpiexec, "-n", "2", *nsys, *app]
    if mode == "per-rank":
        (folder / "per_rank.sh").write_text(PER_RANK)
        return [mpiexec, "-n", "2", "bash", str(folder / "per_rank.sh"), *nsys, *app]
    from hpcprof_kit.jobs import JobSpec

    spec = JobSpec(system="polaris", account="P", ranks_per_node=2, tracer="nsys",
                   tracer_set="host", trace_all=True)  # fmt: skip
    (folder / "tracer.sh").write_text(spec.resolve().tracing.wrapper + "\n")
    env["HPCPROF_RUN_DIR"] = str(folder / "run")
    return [mpiexec, "-n", "2", "bash", str(folder / "tracer.sh"), *app]


def one_run(mode: str, timeout: float) -> tuple[str, str]:
    """('ok' | 'hang' | 'failed', the message nsys gave)."""
    folder = Path(tempfile.mkdtemp(prefix=f"nsys-race-{mode}-"))
    env = {**os.environ, "BASE": str(folder)}
    proc = subprocess.Popen(_command(mode, folder, env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=folder,
                            start_new_session=True)  # fmt: skip
    try:
        _out, err = proc.communicate(timeout=timeout)
        outcome = "ok" if proc.returncode == 0 else "failed"
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _end_agents(folder)
        _out, err = proc.communicate(timeout=60)
        outcome = "hang"
    _end_agents(folder)
    said = next((m for m in MESSAGES if m in err), err.strip()[-120:])
    return outcome, said if outcome != "ok" else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("job", "per-rank", "kit"))
    parser.add_argument("runs", type=int)
    parser.add_argument("--timeout", type=float, default=60)
    args = parser.parse_args()
    tally: dict[str, list[str]] = {"ok": [], "hang": [], "failed": []}
    for i in range(args.runs):
        outcome, said = one_run(args.mode, args.timeout)
        tally[outcome].append(said)
        print(f"run {i}: {outcome} {said}".rstrip(), file=sys.stderr, flush=True)
    load = os.getloadavg()[0]
    print(json.dumps({"mode": args.mode, "runs": args.runs, "load1": round(load, 1),
                      **{k: len(v) for k, v in tally.items()},
                      "messages": tally["hang"] + tally["failed"]}))  # fmt: skip


if __name__ == "__main__":
    main()
