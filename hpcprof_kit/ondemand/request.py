"""The asking side of on-demand tracing: drop a request into a run directory, wait for the acks.

Only the file system is shared between the asker and the ranks, so this works the same for a
local, Slurm or PBS job.
"""

from __future__ import annotations

import json
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

from hpcprof_kit.errors import OnDemandError
from hpcprof_kit.jobs.backends import FINAL_STATES
from hpcprof_kit.ondemand.trigger import ONDEMAND_DIR, write_json_atomically


@dataclass
class TraceAnswer:
    """What came back: the request id, each answering rank's ack, and the ranks still silent."""

    id: str
    steps: int
    acks: dict[int, dict] = field(default_factory=dict)
    missing: list[int] = field(default_factory=list)

    @property
    def traces(self) -> dict[int, str]:
        """Trace path (relative to the run directory) per rank."""
        return {r: a["trace"] for r, a in sorted(self.acks.items()) if a.get("trace")}

    def summary(self) -> str:
        lines = [f"on-demand trace {self.id}: {self.steps} optimizer steps"]
        for rank, ack in sorted(self.acks.items()):
            if ack.get("ok"):
                lines.append(
                    f"  rank {rank}: steps {ack['first_step']}-{ack['last_step']} -> {ack['trace']}"
                )
            else:
                lines.append(f"  rank {rank}: failed: {ack.get('error')}")
        return "\n".join(lines)


def live_ranks(run_dir: Path) -> dict[int, dict]:
    """Ranks that installed the trigger and have not exited, from ``ondemand/live/``."""
    found = {}
    for path in sorted((Path(run_dir) / ONDEMAND_DIR / "live").glob("rank-*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # removed or being rewritten this very moment
        found[int(data["rank"])] = data
    return found


def _check_run_is_live(run_dir: Path) -> dict[int, dict]:
    if not run_dir.is_dir():
        raise OnDemandError(
            f"run directory {run_dir} does not exist; pass the RUN_DIR of a running job"
        )
    manifest = run_dir / "manifest.json"
    if manifest.is_file():
        state = json.loads(manifest.read_text()).get("state", "")
        if state in FINAL_STATES:
            raise OnDemandError(
                f"run {run_dir.name} has finished (manifest state {state}); on-demand traces need a "
                "running job - start a new run and ask while it trains"
            )
    live = live_ranks(run_dir)
    if not live:
        raise OnDemandError(
            f"no live ranks in {run_dir.name} (nothing in {ONDEMAND_DIR}/live/): the job has ended, "
            "has not reached its first optimizer step yet, or was started without the trigger - "
            "launch it as 'python -m hpcprof_kit.ondemand -- app.py ...' or call "
            "hpcprof_kit.ondemand.install() in the app"
        )
    return live


def request_trace(
    run_dir: str | Path, steps: int = 2, timeout: float = 60.0, poll: float = 0.2
) -> TraceAnswer:
    """Ask every rank of a running job to trace its next ``steps`` optimizer steps; wait for all.

    Raises OnDemandError for a finished run, a run with no live ranks, or ranks that do not
    answer within ``timeout`` seconds (the message says which ranks did).

    >>> request_trace("runs/train_local_N1_R2_20260101-120000", steps=3)  # doctest: +SKIP
    """
    run_dir = Path(run_dir)
    if not isinstance(steps, int) or steps < 1:
        raise OnDemandError(f"steps={steps!r} must be a whole number >= 1 (e.g. --steps 2)")
    live = _check_run_is_live(run_dir)
    world = max(int(d.get("world_size", 1)) for d in live.values())
    req_id = time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)
    folder = run_dir / ONDEMAND_DIR
    write_json_atomically(
        folder / f"request-{req_id}.json", {"id": req_id, "steps": steps, "created": time.time()}
    )
    answer = TraceAnswer(req_id, steps)
    deadline = time.monotonic() + timeout
    while True:
        for path in folder.joinpath("acks").glob(f"ack-{req_id}-*.json"):
            ack = json.loads(path.read_text())
            answer.acks[int(ack["rank"])] = ack
        answer.missing = [r for r in range(world) if r not in answer.acks]
        if not answer.missing:
            return answer
        gone = not live_ranks(run_dir)
        if gone or time.monotonic() > deadline:
            answered = ", ".join(map(str, sorted(answer.acks))) or "none"
            why = "the job ended first" if gone else f"no answer within {timeout:g} s"
            raise OnDemandError(
                f"on-demand request {req_id} in {run_dir.name}: ranks answered: {answered}; "
                f"silent: {', '.join(map(str, answer.missing))} ({why}); a rank answers after its "
                "next optimizer step - raise --timeout for slow steps"
            )
        time.sleep(poll)
