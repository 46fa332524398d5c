"""``hpcprof-kit traces summary|report|top|plot|merge`` and ``hpcprof-kit timings``: traces from a shell.

>>> from hpcprof_kit.cli import main
>>> main(["traces", "summary", "runs/x/traces"])      # doctest: +SKIP
rank kind events steps wall_ms compute_ms hidden_comm_ms exposed_comm_ms memory_ms host_ms idle_ms
...
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

from hpcprof_kit.errors import TraceFormatError

PLOTS = ("timeline", "breakdown", "heatmap")
NOTHING_TO_RANK = {
    "op": "no ops in this trace",
    "kernel": "no kernels in this trace (top kernels need device events)",
    "range": "no record_function ranges in this trace; wrap code in record_function('name'), "
    "@trace_func or capture('name') (hpcprof_kit.profiling) and profile again",
}
NAME_WIDTH = 60


PATH_HELP = "a run directory, trace files, traces/ folders or globs (all ranks of one run)"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "traces",
        help="summarise, rank, plot or merge profiler traces (all ranks at once)",
        description="Read the Kineto/unitrace traces of a run (a file, a folder or a glob) and "
        "print where the time went.",
    )
    sub = p.add_subparsers(dest="traces_command", metavar="ACTION", required=True)

    s = sub.add_parser(
        "summary",
        help="per rank: events, steps and the step breakdown totals",
        description="Per rank: events, steps and the step breakdown totals. With --mpi, run "
        "under an MPI launcher (mpiexec -n 8 hpcprof-kit traces summary PATH --mpi): the MPI "
        "ranks share the rank files out, each loading one at a time, and rank 0 prints the "
        "same table and writes the run's tables and plots to --out.",
        epilog="Exit status with --mpi: 0 when the run was analysed, even if some files did "
        "not load (each is named on stderr with the reason, and listed in "
        "tables/failures.json); 2 when no file loaded.",
    )
    s.add_argument("path", metavar="PATH", nargs="+", help=PATH_HELP)
    s.add_argument("--json", action="store_true", help="print JSON instead of a table")
    s.add_argument(
        "--mpi", action="store_true", help="analyse as an MPI job (needs mpi4py and a launcher)"
    )
    s.add_argument(
        "--out",
        metavar="DIR",
        help="write tables/*.csv, plots/*.png and summaries/rank-<r>.npz here (default with "
        "--mpi: $HPCPROF_RUN_DIR, else PATH when it is one run directory, else nothing)",
    )
    s.set_defaults(func=cmd_summary)

    r = sub.add_parser(
        "report",
        help="the run's report: findings, then overview, operators, kernels, memory, distributed",
        description="What looks wrong with a run (each finding with its number, threshold, "
        "evidence and what to try), and the panes of the run's profile. Prints the findings; "
        "-o writes every pane as one HTML file that opens offline; --json prints it all.",
        epilog="Exit status: 0 when the report was made, whatever it found; 2 on bad input.",
    )
    r.add_argument("path", metavar="PATH", nargs="+", help=PATH_HELP)
    r.add_argument("-o", "--output", metavar="HTML", help="write the report as one HTML file")
    r.add_argument("--json", action="store_true", help="print the report as JSON")
    r.add_argument("--force", action="store_true", help="replace the HTML file if it exists")
    r.add_argument("--top", type=int, default=20, help="rows of the top tables (default 20)")
    r.add_argument(
        "--mpi",
        action="store_true",
        help="build it from per-rank summaries made across an MPI job (mpiexec -n 8 "
        "hpcprof-kit traces report PATH --mpi): the same findings, the panes a summary fills",
    )
    r.set_defaults(func=cmd_report)

    t = sub.add_parser("top", help="the ops, kernels or record_function ranges with the most time")
    t.add_argument("path", metavar="PATH", nargs="+", help=PATH_HELP)
    t.add_argument(
        "--by",
        choices=("op", "kernel", "range"),
        default="op",
        help="op (default), kernel, or range: your record_function ranges",
    )
    t.add_argument("-n", type=int, default=20, help="rows (default 20)")
    t.set_defaults(func=cmd_top)

    g = sub.add_parser("plot", help="draw a timeline, breakdown or rank heatmap to a PNG file")
    g.add_argument("path", metavar="PATH", nargs="+", help=PATH_HELP)
    g.add_argument("-o", "--output", required=True, help="image file (.png, .svg, .pdf)")
    g.add_argument("--kind", choices=PLOTS, default="timeline")
    g.add_argument("--force", action="store_true", help="replace the image if it exists")
    g.set_defaults(func=cmd_plot)

    m = sub.add_parser("merge", help="one chrome trace of every rank, for ui.perfetto.dev")
    m.add_argument("path", metavar="PATH", nargs="+", help=PATH_HELP)
    m.add_argument("-o", "--output", required=True, help="merged .json file")
    m.add_argument("--force", action="store_true", help="replace the merged file if it exists")
    m.add_argument(
        "--align",
        choices=("steps", "absolute"),
        default="steps",
        help="line up each rank's first step (default) or keep the recorded clocks",
    )
    m.set_defaults(func=cmd_merge)

    tm = subparsers.add_parser(
        "timings",
        help="summarise the apps' per-rank timing JSON of one or more runs",
        description="Read timings/ of run directories and print per-op statistics or compute vs comm.",
    )
    tm.add_argument(
        "paths", metavar="PATH", nargs="+", help="run directories, timings/ folders, files"
    )
    tm.add_argument("--compute-vs-comm", action="store_true", help="one row per configuration")
    tm.add_argument("-o", "--output", help="also draw compute vs comm to this image file")
    tm.set_defaults(func=cmd_timings)


def _load(path: list[str]):
    from hpcprof_kit.traces import load

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        df = load(path)
    for w in caught:  # the loader's findings (no rank in file, bytes lost) go to stderr
        print(f"warning: {w.message}", file=sys.stderr)
    if len(df) == 0:
        raise TraceFormatError(nothing_loaded(df.attrs.get("ranks", {})))
    return df


def nothing_loaded(ranks: dict) -> str:
    """Why each file gave no event, in one line: its last finding, or that it holds none.

    >>> nothing_loaded({0: {"source": "t.json", "warnings": ["skipped 3 bad events"]}})
    't.json: no event loaded: skipped 3 bad events'
    """
    why = []
    for meta in ranks.values():
        notes = [n for n in meta.get("warnings", []) if not n.startswith("no rank in")]
        bad = [n for n in notes if n.startswith("skipped")]
        reason = (bad or notes or ["it holds no complete (X) or instant (i) events"])[0]
        why.append(f"{meta.get('source', '?')}: no event loaded: {reason}")
    return "; ".join(why) or "no event loaded"


def summary_table(df):
    """Per rank: kind, events, steps, and the breakdown parts summed over the steps (ms)."""
    from hpcprof_kit.traces import step_breakdown
    from hpcprof_kit.traces.view.summary import rank_table

    return rank_table(step_breakdown(df), df.groupby("rank").size())


def default_out(paths: list[str]) -> Path | None:
    """Where --mpi writes when --out is not given: the job's run directory, else PATH when
    it is one run directory, else nowhere."""
    from hpcprof_kit.paths import current_run_dir
    from hpcprof_kit.traces.table.loader import RUN_DIR_MARKERS

    here = current_run_dir()
    if here is not None:
        return Path(here)
    if len(paths) == 1 and any((Path(paths[0]) / m).is_file() for m in RUN_DIR_MARKERS):
        return Path(paths[0])
    return None


def cmd_summary(args: argparse.Namespace) -> int:
    if args.mpi:
        from hpcprof_kit.traces.reporting.mpi_summary import run_summary

        out = args.out or default_out(args.path)
        run = run_summary(args.path, out=out)
        if run is None:  # not MPI rank 0: rank 0 speaks for the job
            return 0
        skipped = {r: m["skipped"] for r, m in run.ranks.items() if m.get("skipped")}
        print_summary(run.summary, skipped, args.json)
        if out is not None and not args.json:
            print(f"tables in {Path(out) / 'tables'}, plots in {Path(out) / 'plots'}")
        return 0
    df = _load(args.path)
    skipped = {r: m["skipped"] for r, m in df.attrs["ranks"].items() if m.get("skipped")}
    if args.out:
        from hpcprof_kit.traces.reporting.summary_store import write_plots, write_tables
        from hpcprof_kit.traces.view.summary import summarise

        run = summarise(df)
        write_tables(run, Path(args.out) / "tables")
        write_plots(run, Path(args.out) / "plots")
    print_summary(summary_table(df), skipped, args.json)
    return 0


def print_summary(table, skipped: dict, as_json: bool) -> None:
    """The summary table (or its JSON), and a note for ranks with bad events skipped."""
    if as_json:
        print(json.dumps(table.round(3).to_dict(orient="records"), indent=1))
        return
    print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    for rank, n in skipped.items():
        print(f"note: rank {rank}: {n} bad events skipped (see warnings)")
    if (table["steps"] == 0).any():
        print("note: ranks with 0 steps have no ProfilerStep events; their whole trace is step -1")


def cmd_report(args: argparse.Namespace) -> int:
    from hpcprof_kit.errors import SpecError
    from hpcprof_kit.traces.reporting.report import report

    if args.top < 1:
        raise SpecError(f"--top {args.top} is not a number of rows; pass --top 1 or more")
    if args.output:
        _refuse_existing(args.output, args.force)
    if args.mpi:
        from hpcprof_kit.traces.reporting.mpi_summary import run_summary
        from hpcprof_kit.traces.reporting.report import report_from_summary

        run = run_summary(args.path)
        if run is None:  # not MPI rank 0: rank 0 speaks for the job
            return 0
        rep = report_from_summary(run, top=args.top)
    else:
        rep = report(_load(args.path), top=args.top)
    if args.output:
        import matplotlib

        matplotlib.use("Agg")
        path = rep.write_html(args.output, force=args.force)
    if args.json:
        print(rep.to_json())
        return 0
    print_findings(rep)
    if args.output:
        print(f"report: {path}")
    return 0


def print_findings(rep) -> None:
    """The findings, a paragraph each, and what each pane could not show."""
    run = rep.run
    print(
        f"{len(run['ranks'])} rank(s) of world size {run['world_size'] or '?'}, {run['kind']} "
        f"trace, steps {run['steps']}, {run['events']:,} events"
    )
    if rep.time_lost is not None:
        print("\n" + rep.time_lost.text())
    not_run = getattr(rep.findings, "coverage", {})  # rules that could not run, and why
    if not rep.findings:
        print("no finding: none of the rules " + ("that ran " if not_run else "") + "triggered")
    for kind, why in not_run.items():
        print(f"  not run: {kind}: {why}")
    for f in rep.findings:
        print(f"\n[{f['kind']}] ranks {f['ranks']}: {f['summary']}")
        lost = f.get("lost_ms")
        cost = f", lost {lost:.1f} ms of the run" if lost is not None else ""
        print(f"  value {f['value']} {f['unit']} (threshold {f['threshold']}){cost}")
        print(f"  try: {f['advice']}")
    for name, pane in rep.panes.items():
        for what, why in pane.missing.items():
            print(f"note: {name}: no {what}: {why}")


def cmd_top(args: argparse.Namespace) -> int:
    from hpcprof_kit.traces import top_kernels, top_ops, user_ranges

    df = _load(args.path)
    if args.by == "range":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # said below, in the CLI's words
            table = user_ranges(df, n=args.n)
    else:
        table = (top_ops if args.by == "op" else top_kernels)(df, n=args.n)
    if table.empty:
        print(NOTHING_TO_RANK[args.by])
        return 1
    # C++ kernel names run to thousands of characters; the table shows their start
    table.index = [
        name if len(name) <= NAME_WIDTH else name[: NAME_WIDTH - 3] + "..." for name in table.index
    ]
    print(table.to_string(float_format=lambda v: f"{v:.3f}"))
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    import matplotlib

    matplotlib.use("Agg")
    from hpcprof_kit.traces.plots.charts import plot_breakdown, plot_rank_heatmap
    from hpcprof_kit.traces.plots.timeline import plot_timeline

    draw = {"timeline": plot_timeline, "breakdown": plot_breakdown, "heatmap": plot_rank_heatmap}
    _refuse_existing(args.output, args.force)
    result = draw[args.kind](_load(args.path))
    print(result.save(args.output))
    return 0


def _refuse_existing(output: str, force: bool) -> None:
    """plot and merge alike: an existing output is replaced only with --force."""
    from hpcprof_kit.errors import SpecError

    if Path(output).exists() and not force:
        raise SpecError(
            f"-o {output} exists already; pick a new file name, or pass --force to replace it"
        )


def cmd_merge(args: argparse.Namespace) -> int:
    from hpcprof_kit.errors import SpecError

    _refuse_existing(args.output, args.force)
    if args.force:
        Path(args.output).unlink(missing_ok=True)
    try:
        from hpcprof_kit.traces import merge_to_chrome
    except (ImportError, AttributeError) as exc:
        raise SpecError(
            "merging needs hpcprof_kit.traces.merge_to_chrome, which this installation lacks; "
            "update the kit"
        ) from exc
    written = merge_to_chrome(_load(args.path), args.output, align=args.align)
    print(written if written is not None else args.output)
    return 0


def cmd_timings(args: argparse.Namespace) -> int:
    from hpcprof_kit import timing

    table = timing.load_timings(list(args.paths))
    out = timing.compute_vs_comm(table) if args.compute_vs_comm else timing.timing_summary(table)
    print(out.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if args.output:
        import matplotlib

        matplotlib.use("Agg")
        print(timing.plot_compute_vs_comm(table).save(args.output))
    return 0
