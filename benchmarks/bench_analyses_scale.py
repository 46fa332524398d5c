"""Analyses at scale: does each analysis grow like the events when the ranks grow 4x?

Writes a synthetic run of ``--ranks`` rank files of ``--mb`` MiB each (NCCL ranks from
``make_synthetic_trace.py``; ``--backend gloo`` writes CPU-only gloo ranks instead, ``mixed``
alternates), loads the first ``--small`` files and then all of them in this one process, and
times each analysis (median of ``--repeat`` runs, with min and max). The table gives both
sizes and the growth; a ``json.load`` of the same files is the baseline of linear growth.

    python benchmarks/bench_analyses_scale.py                    # 64 vs 256 ranks of 1 MiB
    python benchmarks/bench_analyses_scale.py --ranks 32 --small 8 --mb 0.5   # quicker
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from make_synthetic_trace import BASE_NS, write_trace  # noqa: E402

GLOO_HEADER = """{{
  "schemaVersion": 1,
  "distributedInfo": {{"backend": "gloo", "rank": {rank}, "world_size": {world}}},
  "baseTimeNanoseconds": {base},
  "traceEvents": [
"""
GLOO_EVENT = """  {{
    "ph": "X", "cat": "{cat}", "name": "{name}", "pid": 777, "tid": {tid},
    "ts": {ts:.3f}, "dur": {dur:.3f},
    "args": {{"External id": {ext}}}
  }},
"""
GLOO_OPS = ["aten::linear", "aten::addmm", "aten::relu", "aten::mse_loss", "aten::add_"]


def write_gloo_trace(path: Path, mb: float, rank: int = 0, world: int = 1, seed: int = 0) -> int:
    """A CPU-only torch.profiler trace of a gloo DDP run: per step, ops on the main thread,
    backward waiting in ``c10d::allreduce_`` while the gloo thread runs ``gloo:all_reduce``.
    Returns the number of events."""
    rng = random.Random(seed + 7919 * rank)
    target = int(mb * 1024 * 1024)
    t, ext, step, events, written = 1_000_000.0 + rank * 2.5, 0, 0, 0, 0
    with open(path, "w") as out:
        out.write(GLOO_HEADER.format(rank=rank, world=world, base=BASE_NS))
        while written < target:
            start, body = t, []
            for _ in range(30):
                ext += 1
                dur = rng.uniform(5, 60)
                name = rng.choice(GLOO_OPS)
                body.append(
                    GLOO_EVENT.format(cat="cpu_op", name=name, tid=1, ts=t, dur=dur, ext=ext)
                )
                inner = rng.uniform(1, dur / 2)
                body.append(
                    GLOO_EVENT.format(
                        cat="cpu_op", name="aten::empty", tid=1, ts=t + 0.5, dur=inner, ext=ext
                    )
                )
                t += dur + rng.uniform(0.2, 1.5)
            wait = rng.uniform(50, 400)
            body.append(
                GLOO_EVENT.format(
                    cat="cpu_op", name="c10d::allreduce_", tid=1, ts=t, dur=wait, ext=ext
                )
            )
            body.append(
                GLOO_EVENT.format(
                    cat="user_annotation",
                    name="gloo:all_reduce",
                    tid=2,
                    ts=t - 20.0,
                    dur=wait + 10.0,
                    ext=ext,
                )
            )
            t += wait + rng.uniform(1, 5)
            head = GLOO_EVENT.format(
                cat="user_annotation",
                name=f"ProfilerStep#{step}",
                tid=1,
                ts=start,
                dur=t - start,
                ext=ext,
            )
            chunk = head + "".join(body)
            out.write(chunk)
            written += len(chunk)
            events += len(body) + 1
            step += 1
            t += 10.0
        end = f'  {{"ph": "i", "name": "end", "pid": 777, "tid": 1, "ts": {t:.3f}, "s": "t"}}'
        out.write(end + "\n  ]\n}")
    return events + 1


def write_run(folder: Path, ranks: int, mb: float, backend: str = "nccl") -> list[Path]:
    """``ranks`` rank files named ``synthetic-<rank>-of-<ranks>.json`` in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for rank in range(ranks):
        path = folder / f"synthetic-{rank}-of-{ranks}.json"
        gloo = backend == "gloo" or (backend == "mixed" and rank % 2)
        (write_gloo_trace if gloo else write_trace)(path, mb, rank=rank, world=ranks)
        paths.append(path)
    return paths


def analyses(df, other) -> dict:
    """Name -> a call of each analysis on the table ``df`` (``other`` is the second run)."""
    from hpcprof_kit import traces as A

    op = str(df.loc[df["cat"] == "cpu_op", "name"].iloc[0])
    calls = {
        "step_spans": lambda: A.step_spans(df),
        "step_breakdown": lambda: A.step_breakdown(df),
        "comm_overlap": lambda: A.comm_overlap(df),
        "rank_steps": lambda: A.rank_steps(df),
        "top_ops": lambda: A.top_ops(df),
        "top_kernels": lambda: A.top_kernels(df),
        "user_ranges": lambda: A.user_ranges(df),
        "same_name": lambda: A.same_name(df, op),
        "compare_runs": lambda: A.compare_runs(df, other),
    }
    try:
        from hpcprof_kit.traces.plots.charts import plot_rank_heatmap
    except ImportError:  # pragma: no cover - plotting extras absent
        return calls
    calls["plot_rank_heatmap"] = lambda: plot_rank_heatmap(df)
    return calls


def timed(fn, repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def measure(paths: list[Path], repeat: int) -> dict:
    from hpcprof_kit.traces import load

    def json_load() -> None:
        for p in paths:
            with open(p) as fh:
                json.load(fh)

    json_load()  # the files into the page cache, the imports done: neither is timed
    times = {"json.load (baseline)": timed(json_load, repeat)}
    df = None

    def kit_load() -> None:
        nonlocal df
        df = load(paths, cache=False, workers=1)

    times["load (workers=1)"] = timed(kit_load, repeat)
    other = df.copy()
    other.attrs = dict(df.attrs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, fn in analyses(df, other).items():
            times[name] = timed(fn, repeat)
    return {"times": times, "events": len(df)}


def table(small: dict, big: dict, n_small: int, n_big: int) -> str:
    head = f"| | {n_small} ranks (median [min-max]) | {n_big} ranks (median [min-max]) | growth |"
    lines = [head, "|---|---|---|---|"]
    base = None
    for name, a in small["times"].items():
        b = big["times"][name]
        ma, mb = statistics.median(a), statistics.median(b)
        growth = mb / ma if ma else float("nan")
        if base is None:
            base = growth
        cell = lambda x, m: f"{m:.3f} s [{min(x):.3f}-{max(x):.3f}]"  # noqa: E731
        lines.append(f"| {name} | {cell(a, ma)} | {cell(b, mb)} | {growth:.1f}x |")
    analyses_total = sum(
        statistics.median(t) for n, t in big["times"].items() if not n.startswith(("json", "load"))
    )
    lines.append(
        f"\nevents: {small['events']:,} vs {big['events']:,}; json.load growth {base:.1f}x"
    )
    lines.append(f"all analyses on {n_big} ranks (sum of medians): {analyses_total:.2f} s")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=256)
    parser.add_argument("--small", type=int, default=64, help="ranks in the smaller run")
    parser.add_argument("--mb", type=float, default=1.0, help="MiB per rank file")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--backend", choices=("nccl", "gloo", "mixed"), default="nccl")
    args = parser.parse_args(argv)
    print(f"loadavg before: {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-analyses-") as tmp:
        t0 = time.perf_counter()
        paths = write_run(Path(tmp), args.ranks, args.mb, args.backend)
        print(f"wrote {args.ranks} rank files ({args.backend}) in {time.perf_counter() - t0:.1f} s")
        small = measure(paths[: args.small], args.repeat)
        big = measure(paths, args.repeat)
    print(table(small, big, args.small, args.ranks))
    print(f"loadavg after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
