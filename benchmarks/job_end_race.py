"""How often a job script ends without its record (``job_end.json``) when the scheduler's
SIGTERM reaches the shell just after its command ended on 143. Not one of run_all's benchmarks:
a check of the rendered script's traps against a race, a few seconds per thousand runs.

    python benchmarks/job_end_race.py            # 2000 runs
    python benchmarks/job_end_race.py 5000 --max-delay-ms 1
    stress-ng --cpu 2 & python benchmarks/job_end_race.py   # under load

Each run takes the record-keeping lines of a script the kit renders (the same lines as every
job script), then a command that waits on a named pipe and exits 143, as srun does once Slurm
has ended its step at the walltime. This process releases the command, spins for a delay drawn
uniformly from 0 to ``--max-delay-ms``, and sends the shell SIGTERM, as slurmd does when it
signals the batch step after the job's other steps. The table counts the runs whose record
names signal 15 (right), those with another record, and those with none.

Measured on 2 shared cores (load1 0.7), the default 2,000 runs (seed 0, 0-4 ms): the traps
before 09f7e55 (the TERM trap only exited, leaving the record to the EXIT trap) lost the record
in 30 runs, with the signal 0.16-1.91 ms after the release, when the EXIT trap had begun and not
yet written; the traps since (a signal's trap writes the record itself, then exits) lost none.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from hpcprof_kit.jobs import JobSpec  # noqa: E402
from hpcprof_kit.jobs.backends.outcome import read_job_end  # noqa: E402


def trap_lines() -> str:
    """The record-keeping lines of a rendered job script."""
    text = JobSpec(system="local", example="train").render()
    start = text.index('hpcprof_signal=""')
    end = re.compile(r"^trap .+ HUP$", re.M).search(text, start).end()
    return "set -eo pipefail\n" + text[start:end] + "\n"


def one_run(folder: Path, script: Path, delay_s: float) -> str:
    """The record's verdict for one run: 'signal 15', 'other record' or 'no record'."""
    gate = folder / "go"
    os.mkfifo(gate)
    shell = subprocess.Popen(["bash", str(script), str(gate)], cwd=folder,
                             stderr=subprocess.DEVNULL)  # fmt: skip
    with open(gate, "w") as fh:  # opens once the command waits on it
        fh.write("go\n")
    until = time.perf_counter() + delay_s
    while time.perf_counter() < until:
        pass
    with contextlib.suppress(ProcessLookupError):
        shell.send_signal(signal.SIGTERM)
    shell.wait(timeout=30)
    record = read_job_end(folder)
    if record is None:
        return "no record"
    return "signal 15" if (record.exit_code, record.signal) == (143, 15) else "other record"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="?", type=int, default=2000)
    parser.add_argument("--max-delay-ms", type=float, default=4.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    counts: collections.Counter[str] = collections.Counter()
    lost_at: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "job.sh"
        script.write_text(trap_lines() + 'bash -c \'read -r _ < "$0"; exit 143\' "$1"\n')
        start = time.monotonic()
        for i in range(args.runs):
            folder = Path(tmp) / f"run{i}"
            folder.mkdir()
            delay = rng.uniform(0, args.max_delay_ms / 1000)
            verdict = one_run(folder, script, delay)
            counts[verdict] += 1
            if verdict == "no record":
                lost_at.append(delay * 1000)
        seconds = time.monotonic() - start
    print(f"{'runs':>6} {'signal 15':>10} {'other record':>13} {'no record':>10}  load1")
    print(f"{args.runs:>6} {counts['signal 15']:>10} {counts['other record']:>13} "
          f"{counts['no record']:>10}  {os.getloadavg()[0]:.1f}")  # fmt: skip
    if lost_at:
        print("records lost with the signal at (ms):", " ".join(f"{d:.2f}" for d in lost_at))
    print(f"{seconds:.1f} s")


if __name__ == "__main__":
    main()
