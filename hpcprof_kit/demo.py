"""The main job on the embedded default, end to end: spec → script → job → traces → table, plot.

>>> from hpcprof_kit.demo import run_demo
>>> run_dir = run_demo()  # doctest: +SKIP

It takes about 20 s on 2 CPU cores. What it does: renders a local job script for the DDP
Transformer example with a profiler schedule (wait=1, warmup=1, active=2, repeat=1), submits it
to the local backend (bash + Hydra ``mpiexec -n 2``), shows progress while it runs, loads the
rank traces, prints a per-rank step-time table, writes ``timeline.png`` and ``summary.md`` /
``summary.json`` into the run directory, and returns that directory.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from hpcprof_kit.errors import KitError

# The schedule the demo teaches: step 0 idle, step 1 warmup, steps 2-3 recorded, then done.
DEMO_SCHEDULE = {"wait": 1, "warmup": 1, "active": 2, "repeat": 1}


class DemoError(KitError, RuntimeError):
    """The demo job did not complete; the message points at its stderr."""


def demo_spec(ranks: int = 2, steps: int = 6):
    """The job spec the demo submits (also shown in notebook 00)."""
    from hpcprof_kit.jobs import JobSpec

    sched = DEMO_SCHEDULE
    args = [
        "--epochs", "1", "--steps-per-epoch", str(steps),
        "--prof-wait", str(sched["wait"]), "--prof-warmup", str(sched["warmup"]),
        "--prof-active", str(sched["active"]), "--prof-repeat", str(sched["repeat"]),
    ]  # fmt: skip
    return JobSpec(
        system="local",
        example="train",
        ranks_per_node=ranks,
        profile=True,
        args=tuple(args),
        walltime="00:10:00",
    )


def summarize(run_dir: Path, df, steps_table) -> dict:
    """Per-rank summary of a finished run: events, recorded steps, step times, breakdown.

    ``steps_table`` is :func:`hpcprof_kit.traces.rank_steps` of the wall times
    (``value="wall"``: steps × ranks, in ms).
    """
    from hpcprof_kit.traces import step_breakdown

    breakdown = step_breakdown(df)
    parts = [c for c in breakdown.columns if c.endswith("_ns") and c not in ("start_ns", "wall_ns")]
    ranks = {}
    for rank, part in df.groupby("rank", observed=True):
        rank = int(rank)
        bd = breakdown[breakdown["rank"] == rank]
        ranks[rank] = {
            "events": int(len(part)),
            "steps": sorted(int(s) for s in bd["step"]),
            "step_time_ms": {int(k): round(float(v), 3) for k, v in steps_table[rank].items()},
            "breakdown_ms": {c[:-3]: round(float(bd[c].sum()) / 1e6, 3) for c in parts},
        }
    return {"run_dir": run_dir.name, "ranks": ranks}


def _write_summary(run_dir: Path, summary: dict, table_text: str) -> None:
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    lines = [
        f"# Demo run {run_dir.name}",
        "",
        "Time each rank worked before waiting for communication (ms), per recorded step;",
        "straggler = the rank the others waited for (-1 when the slowest ranks tie),",
        "cost_ms = how long they waited for it:",
        "",
        "```",
        table_text,
        "```",
        "",
    ]
    for rank, info in sorted(summary["ranks"].items()):
        parts = ", ".join(f"{k} {v} ms" for k, v in info["breakdown_ms"].items())
        lines.append(f"- rank {rank}: {info['events']} events, steps {info['steps']}; {parts}")
    lines += ["", "Timeline: timeline.png; traces: traces/; profiler tables: tables/."]
    (run_dir / "summary.md").write_text("\n".join(lines) + "\n")


def run_demo(runs_root: str | Path | None = None, progress: bool = True) -> Path:
    """Run the demo job and return its run directory (raises DemoError if the job fails)."""
    import matplotlib

    matplotlib.use("Agg")
    from hpcprof_kit import traces
    from hpcprof_kit.jobs import submit

    spec = demo_spec()
    job = submit(spec, backend="local", runs_root=runs_root)
    print(f"submitted {spec.example} on {spec.system} ({spec.ranks_per_node} ranks): {job.run_dir}")
    state = job.wait(progress=progress)
    if str(state) != "COMPLETED" and getattr(state, "value", None) != "COMPLETED":
        tail = job.tail(20, stream="stderr")
        raise DemoError(
            f"the demo job ended {state}; its stderr is in {job.run_dir / 'stderr'}:\n{tail}"
        )
    run_dir = Path(job.run_dir)
    df = traces.load(run_dir / "traces")
    steps = traces.rank_steps(df)
    table_text = steps.round(3).to_string()
    print(table_text)
    fig, _ = _as_fig_and_table(traces.plot_timeline(df))
    fig.savefig(run_dir / "timeline.png", dpi=110, bbox_inches="tight")
    walls = traces.rank_steps(df, value="wall")
    _write_summary(run_dir, summarize(run_dir, df, walls), table_text)
    return run_dir


def _as_fig_and_table(result):
    """Plots return (fig, table); accept a bare figure too."""
    if isinstance(result, tuple):
        return result[0], result[1]
    return result, None


def main() -> int:
    try:
        run_dir = run_demo(progress=True)
    except KitError as exc:
        print(f"hpcprof-kit demo: {exc}", file=sys.stderr)
        return 1
    print(f"timeline: {run_dir / 'timeline.png'}")
    print(f"summary:  {run_dir / 'summary.md'}")
    print(run_dir)
    return 0
