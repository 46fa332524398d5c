"""How often nsys runs of several ranks under Hydra mpiexec fail to start, by how the ranks
start nsys. nsys 2022.4 keeps a node-wide session registry (in /dev/shm, locked through
``$TMPDIR/nvidia``), and its agent start-up fails when two nsys start at once on a node: the CLI
opens the new agent's semaphore after the launcher removed it (``sem_open``), or gives up on the
agent (``Agent launcher failed``); that rank's nsys exits 1 before its program began. Not one of
run_all's benchmarks: it needs nsys and takes minutes.

    python benchmarks/nsys_start_race.py job 40        # raw nsys, one TMPDIR for the job's ranks
    python benchmarks/nsys_start_race.py per-rank 40   # raw nsys, a TMPDIR (and lock) per rank
    python benchmarks/nsys_start_race.py kit 40        # the kit's wrapper (every rank traced): a
                                                       # TMPDIR per rank, the node's lock folder
    python benchmarks/nsys_start_race.py kit 40 --ranks 4     # a Polaris node's four ranks
    stress-ng --cpu 2 & python benchmarks/nsys_start_race.py kit 40   # under load

Each run: a short Python app traced on every rank (``--trace=osrt,nvtx``, no sampling), in its
own process group, in a fresh folder; the app first marks that it began, so a failure says which
ranks' programs ran. A run that does not end in ``--timeout`` seconds is a hang: the launcher and
this run's agents (found by their TMPDIR) are ended. One JSON line at the end: runs that ended
well, hangs and failures, each with the message nsys gave. After a hang, every later nsys on the
machine may hang too (the registry stays locked); that is printed as it is seen, and the registry
must then be removed by hand once nothing else runs nsys.

Measured on 2 shared cores (nice 19; load1 8-18 from other work; "loaded": stress-ng --cpu 2
at nice 19 too), ``kit`` mode as the wrapper is (the ranks' nsys start together), and two
variants tried and not kept: local rank k starting nsys only once local rank k-1's program
began ("in turn"), and a node-wide flock held from each nsys's start until its program began
and from the program's end until nsys exited:

    ranks  load      together          in turn                       flock (not kept)
    4      shared    3 of 60 failed    2 of 60 failed, after 60 s    0 of 34 failed
    4      loaded    -                 0 of 40 failed                -
    2      loaded    0 of 40 failed    -                             -

Every failure was ``sem_open``, and in each the failing rank's program had not begun. In turn, a
rank's nsys still failed when it started while an earlier rank's nsys was ending (the app runs a
few ms; writing its report took seconds), and the next rank then waited its 60 s: nsys 2022.4
races with any nsys starting or ending beside it, and turns at start-up do not remove that (2 of
60 against 3 of 60 is within noise). The flock covered ends too, but it is held through a
descriptor nsys passes on to what it starts (agents left behind by a killed run may keep the node
locked), and a 4-rank job under the rehearsal stand-in did not finish with it (one rank never
reached its program; the cause was not found). The wrapper keeps a TMPDIR per rank and the
node's lock folder; the tests run nsys once and name the race when it happens.
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
# The app marks that it began, first thing: a failed run then says whether nsys's start-up
# failed before the traced program ran.
APP = (
    "import os, pathlib, time\n"
    "pathlib.Path(f\"began{os.environ['PMI_RANK']}\").touch()\n"
    "sum(i * i for i in range(10000))\ntime.sleep(0.02)\n"
)
PER_RANK = 'export TMPDIR="$BASE/tmp/rank$PMI_RANK"; mkdir -p "$TMPDIR"; exec "$@"\n'


def _end_agents(folder: Path) -> None:
    for proc in psutil.process_iter(["cmdline"]):
        with contextlib.suppress(psutil.Error):
            mine = proc.environ().get("TMPDIR", "").startswith(str(folder))
            if "--start-agent" in (proc.info["cmdline"] or []) and mine:
                proc.terminate()


def _command(mode: str, folder: Path, env: dict[str, str], ranks: int) -> list[str]:
    mpiexec = str(Path(sys.executable).parent / "mpiexec")
    (folder / "app.py").write_text(APP)
    app = [sys.executable, str(folder / "app.py")]
    nsys = ["nsys", "profile", "--trace=osrt,nvtx", "--sample=none", "--cpuctxsw=none",
            "-o", str(folder / "rep_%q{PMI_RANK}"), "-f", "true"]  # fmt: skip
    if mode == "job":
        env["TMPDIR"] = str(folder)
        return [mpiexec, "-n", str(ranks), *nsys, *app]
    if mode == "per-rank":
        (folder / "per_rank.sh").write_text(PER_RANK)
        return [mpiexec, "-n", str(ranks), "bash", str(folder / "per_rank.sh"), *nsys, *app]
    from hpcprof_kit.jobs import JobSpec

    spec = JobSpec(system="polaris", account="P", ranks_per_node=ranks, tracer="nsys",
                   tracer_set="host", trace_all=True)  # fmt: skip
    (folder / "tracer.sh").write_text(spec.resolve().tracing.wrapper + "\n")
    env["HPCPROF_RUN_DIR"] = str(folder / "run")
    return [mpiexec, "-n", str(ranks), "bash", str(folder / "tracer.sh"), *app]


def one_run(mode: str, timeout: float, ranks: int = 2) -> tuple[str, str]:
    """('ok' | 'hang' | 'failed', the message nsys gave)."""
    folder = Path(tempfile.mkdtemp(prefix=f"nsys-race-{mode}-"))
    env = {**os.environ, "BASE": str(folder)}
    proc = subprocess.Popen(_command(mode, folder, env, ranks), stdout=subprocess.PIPE,
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
    began = sorted(p.name for p in folder.glob("began*"))
    return outcome, f"{said} (apps begun: {', '.join(began) or 'none'})" if outcome != "ok" else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("mode", choices=("job", "per-rank", "kit"))
    parser.add_argument("runs", type=int)
    parser.add_argument("--timeout", type=float, default=60)
    parser.add_argument("--ranks", type=int, default=2, help="ranks on this node (Polaris: 4)")
    args = parser.parse_args()
    tally: dict[str, list[str]] = {"ok": [], "hang": [], "failed": []}
    for i in range(args.runs):
        outcome, said = one_run(args.mode, args.timeout, args.ranks)
        tally[outcome].append(said)
        print(f"run {i}: {outcome} {said}".rstrip(), file=sys.stderr, flush=True)
    load = os.getloadavg()[0]
    print(json.dumps({"mode": args.mode, "ranks": args.ranks, "runs": args.runs, "load1": round(load, 1),
                      **{k: len(v) for k, v in tally.items()},
                      "messages": tally["hang"] + tally["failed"]}))  # fmt: skip


if __name__ == "__main__":
    main()
