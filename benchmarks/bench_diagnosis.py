"""How often the diagnosis is right: recall and false alarms per kind over generated problem
runs (``hpcprof_kit.traces.corpus``) the rules were not tuned on, plus the findings on every
real third-party trace the project holds (``../shared/traces``), to be read against the
trace.

A planted problem is *found* when a finding of its kind names it (a straggler: its rank, and
at least half its steps). A finding of a kind nobody planted is *spurious*, unless a planted
problem implies it (``IMPLIED``: the device idles while the host loads data, so
``device_idle_host_bound`` is true there too); those are counted apart, as *implied*.

    python benchmarks/bench_diagnosis.py --jobs 2           # seeds 20000-20199, then the real traces
    python benchmarks/bench_diagnosis.py --first 0 --runs 40   # seeds the rules were tuned on

The patterns no single rule of the list names (``hpcprof_kit.traces.corpus_patterns``: a
rotating slow rank, slow steps on every rank, a host stall) have their own runs and table
(``--pattern-runs``): a pattern is found when a finding of its kind names its ranks and at
least half its steps (a rotating straggler: the slow rank of at least half its steps), and its
``lost_ms`` is compared with what the pattern cost in the simulation (goal: within 15 %).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "tests"))

from diagnosis_corpus import KINDS, corpus_run  # noqa: E402

from hpcprof_kit.traces.corpus import PATTERNS  # noqa: E402
from hpcprof_kit.traces.corpus_patterns import pattern_run  # noqa: E402

TUNED_ON = range(0, 5000)  # the seeds the rules may be looked at and tuned on; report on others
COST_TOLERANCE = 0.15  # a pattern's lost_ms within this share of its simulated cost
IMPLIED = {
    "data_loading": {"device_idle_host_bound"},
    "synchronize_in_step": {"device_idle_host_bound"},
    "launch_bound": {"device_idle_host_bound", "short_kernels"},
    "allocator_churn": {"device_idle_host_bound"},
    "sync_copy": {"device_idle_host_bound"},
    "pageable_copy": {"device_idle_host_bound"},
    "small_collectives": {"exposed_communication", "device_idle_host_bound"},
    "low_bus_bandwidth": {"exposed_communication"},
    "no_tensor_cores": set(),
    "straggler": set(),
    # the others wait in the all-reduce for the slow rank
    "rotating_straggler": {"exposed_communication"},
    # a checkpoint's copy to the host blocks it, and the device idles meanwhile
    "slow_steps": {"sync_copy", "device_idle_host_bound", "step_variance"},
    "host_stall": {"device_idle_host_bound", "step_variance"},
}
SHARED = HERE.parent.parent / "shared" / "traces"
RECORDED = HERE.parent / "tests" / "fixtures" / "traces" / "gpu_pathologies"


def diagnose(path: Path):
    """The findings of the run at ``path`` (the report's own call)."""
    from hpcprof_kit import traces
    from hpcprof_kit.traces import findings as fnd
    from hpcprof_kit.traces.view.run_view import RunView

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = traces.load(path, workers=1)  # the runs go in parallel, not their files
        return fnd.find(RunView.of(df))


def named(problem: dict, found: list[dict]) -> bool:
    """Whether a finding names the planted ``problem``."""
    return naming(problem, found) is not None


def naming(problem: dict, found: list[dict]) -> dict | None:
    """The finding that names the planted ``problem``, or None."""
    for f in found:
        if f["kind"] != problem["kind"]:
            continue
        steps = set(problem["steps"])
        if problem["kind"] == "rotating_straggler":
            theirs = {int(k): v for k, v in f["evidence"]["slow_rank_by_step"].items()}
            mine = {int(k): v for k, v in problem["slow_rank_by_step"].items()}
            right = sum(theirs.get(s) == r for s, r in mine.items() if s in steps)
            costly = [s for s in steps if problem.get("cost_by_step", {}).get(s, 1) > 0]
            if right * 2 >= len(costly):
                return f
            continue
        if problem["kind"] in ("slow_steps", "host_stall"):
            if f["ranks"] == problem["ranks"] and len(steps & set(f["steps"])) * 2 >= len(steps):
                return f
            continue
        if problem["kind"] != "straggler":
            return f
        steps = set(problem["steps"])
        if f["ranks"] == problem["ranks"] and len(steps & set(f["steps"])) * 2 >= len(steps):
            return f
    return None


def one_run(job: tuple) -> tuple[int, list[dict], list[dict]]:
    """Seed -> (seed, answer key, findings) of one generated run, written under a folder;
    ``patterns`` draws it from the patterns' generator."""
    seed, root, *patterns = job
    run = pattern_run(seed) if patterns and patterns[0] else corpus_run(seed)
    folder = Path(root) / f"run{seed}"
    found = diagnose(run.write(folder))
    shutil.rmtree(folder)
    keep = ("kind", "ranks", "steps", "lost_ms")
    key = run.key()
    for p, problem in zip(key, [p for p in run.problems if p.key() in key], strict=True):
        if p["kind"] in PATTERNS:
            p["cost_by_step"] = {int(s): c for s, c in problem.cost_ms.items()}
    return seed, key, [{**{k: f.get(k) for k in keep}, "evidence": {
        "slow_rank_by_step": f["evidence"].get("slow_rank_by_step", {})}} for f in found]


def score(seeds, root: Path, verbose: bool = False, jobs: int = 1,
          patterns: bool = False) -> dict:  # fmt: skip
    """Planted, found, missed, spurious and implied per kind; findings on clean runs; with
    ``patterns``, the runs of the patterns' generator and each found pattern's cost error."""
    from hpcprof_kit.traces.findings import FINDING_KINDS

    planted_kinds = PATTERNS if patterns else KINDS
    t = {k: Counter() for k in (*planted_kinds,
                                *(k for k in FINDING_KINDS if k not in planted_kinds))}  # fmt: skip
    errors: dict[str, list[float]] = {k: [] for k in planted_kinds}
    clean_runs = clean_findings = planted_runs = 0
    misses, spurious = [], []
    work = [(seed, str(root), patterns) for seed in seeds]
    if jobs > 1:
        from multiprocessing import get_context

        with get_context("spawn").Pool(jobs) as pool:
            results = pool.map(one_run, work, chunksize=1)
    else:
        results = [one_run(w) for w in work]
    for seed, key, found in results:
        kinds = {p["kind"] for p in key}
        implied = set().union(*(IMPLIED[k] for k in kinds)) if kinds else set()
        if not key:
            clean_runs += 1
            clean_findings += len(found)
        else:
            planted_runs += 1
        for p in key:
            t[p["kind"]]["planted"] += 1
            f = naming(p, found)
            hit = f is not None
            t[p["kind"]]["found" if hit else "missed"] += 1
            if hit and "cost_ms" in p and p["cost_ms"] > 0 and f.get("lost_ms") is not None:
                errors[p["kind"]].append(abs(f["lost_ms"] - p["cost_ms"]) / p["cost_ms"])
            if not hit:
                misses.append((seed, p["kind"], p["ranks"][:3], p["steps"]))
        for f in found:
            if f["kind"] in kinds and (f["kind"] != "straggler" or any(
                    named(p, [f]) for p in key if p["kind"] == "straggler")):  # fmt: skip
                continue
            row = t[f["kind"]]
            if f["kind"] in implied:
                row["implied"] += 1
            else:
                row["spurious"] += 1
                spurious.append((seed, f["kind"], f["ranks"][:4], sorted(kinds)))
        if verbose:
            print(seed, sorted(kinds), [f["kind"] for f in found], flush=True)
    return {"table": t, "clean_runs": clean_runs, "clean_findings": clean_findings,
            "planted_runs": planted_runs, "misses": misses, "spurious": spurious,
            "errors": errors}  # fmt: skip


def print_table(s: dict) -> None:
    errors = s.get("errors", {})
    print(f"{'kind':<24}{'planted':>8}{'found':>7}{'missed':>7}{'recall':>8}{'spurious':>9}"
          f"{'implied':>8}{'cost err median':>16}{'within 15 %':>12}")  # fmt: skip
    total_spurious = 0
    for kind, row in s["table"].items():
        if not sum(row.values()):
            continue
        recall = f"{100 * row['found'] / row['planted']:.1f} %" if row["planted"] else "-"
        total_spurious += row["spurious"]
        err = errors.get(kind) or []
        med = f"{100 * sorted(err)[len(err) // 2]:.1f} %" if err else "-"
        within = (f"{100 * sum(e <= COST_TOLERANCE for e in err) / len(err):.0f} %"
                  if err else "-")  # fmt: skip
        print(f"{kind:<24}{row['planted']:>8}{row['found']:>7}{row['missed']:>7}{recall:>8}"
              f"{row['spurious']:>9}{row['implied']:>8}{med:>16}{within:>12}")  # fmt: skip
    print(f"clean runs: {s['clean_runs']}, findings on them: {s['clean_findings']}")
    print(f"runs with problems: {s['planted_runs']}, spurious findings: {total_spurious} "
          f"({20 * total_spurious / max(1, s['planted_runs']):.2f} per 20 runs; goal: 1 or less)")  # fmt: skip
    for m in s["misses"]:
        print("  missed:", m)
    for m in s["spurious"]:
        print("  spurious:", m)


def real_traces() -> None:
    """Each real trace's findings, and the rules that could not run, to read against it."""
    files = sorted(p for p in SHARED.rglob("*") if p.name.endswith((".json", ".json.gz")))
    if not files:
        print(f"\nno real traces at {SHARED.name}/: skipped")
        return
    print(f"\nreal traces ({len(files)}):")
    for path in files:
        try:
            found = diagnose(path)
        except Exception as exc:  # a trace the kit refuses says why, and the others go on
            print(f"  {path.relative_to(SHARED)}: refused: {exc}")
            continue
        kinds = [f"{f['kind']} ({f['value']:g} {f['unit']})" for f in found] or ["none"]
        print(f"  {path.relative_to(SHARED)}: {'; '.join(kinds)}")
        for note in found.notes:
            print(f"      note: {note}")
        for kind, why in sorted(found.coverage.items()):
            print(f"      {kind}: {why}")


def recorded_runs() -> None:
    """The kit's own runs recorded on a GPU (the pathologies app, README beside them): per run,
    what was planted, what the report named, and any other finding: implied by a planted one,
    or not planted (true or false: read it against the trace)."""
    import json

    cases = json.loads((RECORDED / "cases.json").read_text())
    print(f"\nrecorded GPU runs ({len(cases)}, {RECORDED.relative_to(HERE.parent)}):")
    print(f"  {'run':<20} {'ranks':>5}  {'planted':<46} {'named':<8} other findings")
    named = planted_total = spurious = 0
    for case in cases:
        flags = case["flags"]
        planted = {p for p in flags[flags.index("--problem") + 1].split(",") if p != "none"}
        found = {f["kind"]: f for f in diagnose(RECORDED / case["case"] / "traces")}
        hit = {k for k in planted if k in found}
        allowed = set().union(*(IMPLIED.get(k, set()) for k in planted)) if planted else set()
        other = sorted(set(found) - planted)
        spurious += len([k for k in other if k not in allowed])
        named, planted_total = named + len(hit), planted_total + len(planted)
        text = ", ".join(f"{k}{'' if k in allowed else ' (not planted)'}" for k in other) or "-"
        print(f"  {case['case']:<20} {case['ranks']:>5}  {','.join(sorted(planted)) or 'none':<46} "
              f"{len(hit)}/{len(planted):<6} {text}")  # fmt: skip
    print(f"  named {named} of {planted_total} planted problems; findings of kinds not planted "
          f"nor implied: {spurious} (read each against its trace)")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--first", type=int, default=20000, help="first seed (default 20000)")
    ap.add_argument("--runs", type=int, default=200, help="generated runs (default 200)")
    ap.add_argument("--no-real", action="store_true", help="skip the real traces")
    ap.add_argument("-v", "--verbose", action="store_true", help="one line per run")
    ap.add_argument("--jobs", type=int, default=1, help="processes (default 1)")
    ap.add_argument("--pattern-runs", type=int, default=200,
                    help="runs of the patterns' generator from --first (default 200; 0: none)")
    a = ap.parse_args(argv)
    seeds = range(a.first, a.first + a.runs)
    tuned = sorted(set(seeds) & set(TUNED_ON))
    print(f"seeds {seeds.start}-{seeds.stop - 1} ({a.runs} runs)"
          + (f"; {len(tuned)} of them were tuned on" if tuned else "; none tuned on"))  # fmt: skip
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        s = score(seeds, Path(tmp), a.verbose, a.jobs)
        print_table(s)
        if a.pattern_runs:
            pseeds = range(a.first, a.first + a.pattern_runs)
            print(f"\npatterns: seeds {pseeds.start}-{pseeds.stop - 1} ({a.pattern_runs} runs)")
            print_table(score(pseeds, Path(tmp), a.verbose, a.jobs, patterns=True))
    print(f"({time.perf_counter() - t0:.0f} s)")
    if not a.no_real:
        real_traces()
        recorded_runs()
    return 0


if __name__ == "__main__":
    sys.exit(main())
