"""``hpcprof-kit sweep``: one spec, a grid of values, a run directory per variant, one table.

``hpcprof-kit sweep --system local --example seqpar --vary nodes=1 --vary=--dtype=float32,bfloat16``
runs every combination (an app flag is written ``--vary=--FLAG=V1,V2``: its dashes would
otherwise read as an option); ``--dry-run`` prints the variants and the script they would
run, submitting and writing nothing (``render --vary`` alike); ``--resume SWEEP_DIR`` runs only
the variants that are missing or did not complete (the job flags given with it, ``--walltime``,
``--queue``, ``--nodes``, ``--account``..., apply to them, not to a field the grid varies); ``hpcprof-kit sweep compare SWEEP_DIR``
writes and prints ``comparison.csv``, which ``--wait`` prints at the end too; ``hpcprof-kit sweep
cancel SWEEP_DIR`` ends every variant that has not ended (its array, or the job running them in
turn). ``sweep`` prints the job ids it submitted.

>>> from hpcprof_kit.cli import main
>>> main(["sweep", "--system", "local", "--vary", "colour=red"])  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import json
import sys

from hpcprof_kit.cli.spec_args import (
    NEVER_RUNS_EXIT,
    SPEC_FLAGS,
    _spec,
    _spec_options,
    _warnings_as_lines,
)
from hpcprof_kit.errors import SpecError


def _states(sweep) -> dict[str, str]:
    return {str(e["index"]): e.get("state", "NEW") for e in sweep.record()["variants"]}


def cmd_sweep(args: argparse.Namespace) -> int:
    from hpcprof_kit.jobs.sweep import Sweep

    words = list(getattr(args, "app_command", None) or ())
    if words[:1] == ["compare"]:
        if len(words) != 2:
            raise SpecError("sweep compare takes one sweep directory: sweep compare SWEEP_DIR")
        return _compare(Sweep.load(words[1]), args.json)
    if words[:1] == ["cancel"]:
        if len(words) != 2:
            raise SpecError("sweep cancel takes one sweep directory: sweep cancel SWEEP_DIR")
        return _cancel(Sweep.load(words[1]))
    with _warnings_as_lines("sweep"):
        sweep = sweep_from_args(args)
        if args.dry_run:
            sys.stdout.write(sweep.preview(args.backend, args.max_concurrent))
            return 0
        before = set(_job_ids(sweep)) if sweep.path is not None else set()
        sweep.run(backend=args.backend, wait=args.wait, max_concurrent=args.max_concurrent)
    submitted = [j for j in _job_ids(sweep) if j not in before]
    failed = [i for i, s in _states(sweep).items() if s not in ("COMPLETED", "QUEUED", "RUNNING")]
    never = _never_runs(sweep) if args.wait else {}
    if args.json:
        out = {"sweep_dir": str(sweep.path), "job_ids": submitted, "states": _states(sweep)}
        if never:
            out["can_never_run"] = {str(i): said for i, said in never.items()}
        elif args.wait:  # every variant has ended: the comparison 'sweep compare' gives
            out["comparison"] = json.loads(_table_json(sweep.compare()))
        print(json.dumps(out, indent=2))
    else:
        print(f"sweep {sweep.path}")
        if submitted:
            many = "s" if len(submitted) > 1 else ""
            print(f"  submitted job{many}: {' '.join(submitted)} (hpcprof-kit sweep cancel "
                  f"{sweep.path} ends every variant)")  # fmt: skip
        for entry in sweep.record()["variants"]:
            print(f"  {entry['index']:>3} {entry.get('state', 'NEW'):<10} {entry['label']}")
        if failed:
            print(f"  {len(failed)} variant(s) did not complete; run it again with "
                  f"--resume {sweep.path}")  # fmt: skip
        for index, said in never.items():
            print(f"  variant {index} can never run as asked; the scheduler says: {said}")
        if never:
            print("  waiting will not help: cancel its job (hpcprof-kit cancel RUN_DIR), change "
                  "the request (fewer --nodes, a shorter --walltime, another --queue) and sweep "
                  "again")  # fmt: skip
        elif args.wait:
            print()
            _compare(sweep, as_json=False)
    return NEVER_RUNS_EXIT if never else 1 if failed else 0


def _job_ids(sweep) -> list[str]:
    """The scheduler jobs holding the sweep's variants (none for the local backend, whose
    ids name processes of this machine)."""
    from hpcprof_kit.jobs.sweep_cancel import sweep_job_ids

    return [j for j in sweep_job_ids(sweep) if not j.startswith("local-")]


def _cancel(sweep) -> int:
    """``sweep cancel DIR``: every variant that has not ended, then each one's state."""
    from hpcprof_kit.jobs.sweep_cancel import cancel_sweep

    states = cancel_sweep(sweep)
    print(f"sweep {sweep.path}")
    for entry in sweep.record()["variants"]:
        print(f"  {entry['index']:>3} {states.get(entry['index'], entry.get('state', 'NEW')):<11}"
              f" {entry['label']}")  # fmt: skip
    return 0


def _never_runs(sweep) -> dict[int, str]:
    """The variants still queued whose scheduler says they can never run, with its words."""
    from hpcprof_kit.jobs.explain import can_never_run
    from hpcprof_kit.jobs.rundir import RunDir

    found = {}
    for entry in sweep.record()["variants"]:
        if entry.get("state") == "QUEUED" and entry.get("run_dir"):
            said = RunDir(sweep.path / entry["run_dir"]).manifest().get("comment")
            if can_never_run(said):
                found[entry["index"]] = said
    return found


def sweep_from_args(args: argparse.Namespace):
    """The sweep the flags describe: ``--resume DIR``'s, or the spec's over ``--vary``'s grid
    (checked: SpecError before anything is written)."""
    from hpcprof_kit.jobs.sweep import Sweep, parse_vary

    if getattr(args, "resume", None):
        if args.vary:
            raise SpecError(
                "--resume runs the grid kept in the sweep's sweep.json; leave --vary out, "
                "or start a new sweep without --resume"
            )
        return Sweep.load(args.resume).with_job_flags(resume_flags(args))
    if not args.vary:
        raise SpecError("sweep needs at least one --vary FIELD=V1,V2 (e.g. --vary nodes=1,2)")
    base = _spec(args)
    return Sweep(base, parse_vary(args.vary, base)).validate()


# What a resume keeps from its sweep whatever is given: the job itself (its system and
# example); every other job flag applies to the variants it runs again.
KEPT_ON_RESUME = ("system", "example")


def resume_flags(args: argparse.Namespace) -> dict:
    """The job flags given with ``--resume`` (``--walltime``, ``--queue``, ``--nodes``,
    ``--account``...); SpecError for what a resume cannot change."""
    given = {key: getattr(args, key) for key in SPEC_FLAGS if hasattr(args, key)}
    for key in KEPT_ON_RESUME:
        if key in given:
            raise SpecError(
                f"--{key} {given[key]}: a resume runs the sweep's own {key} (its sweep.json); "
                f"leave --{key} out, or start a new sweep with --{key} {given[key]}"
            )
    if getattr(args, "spec", None):
        raise SpecError(f"--spec {args.spec}: a resume runs the spec kept in the sweep's "
                        "sweep.json; leave --spec out and give the flags to change")  # fmt: skip
    if getattr(args, "app_command", None):
        words = " ".join(args.app_command)
        raise SpecError(f"'-- {words}': a resume runs the sweep's own command and arguments; "
                        "leave them out, or start a new sweep with them")  # fmt: skip
    return given


def vary_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--vary", action="append", default=[], metavar="FIELD=V1,V2",
        help="a JobSpec field (nodes, binding...) or app flag (--vary=--dtype=float32,bfloat16: "
        "the app gets each value as typed; --vary=--FLAG runs a switch off and on)",
    )  # fmt: skip


def _compare(sweep, as_json: bool) -> int:
    table = sweep.compare()
    if as_json:
        print(_table_json(table))
    else:
        import pandas as pd

        with pd.option_context("display.width", 200, "display.max_columns", 40):
            print(table.drop(columns=["run_dir"]).to_string())
        print(f"written: {sweep.path / 'comparison.csv'}", file=sys.stderr)
    return 0


def _table_json(table) -> str:
    return table.reset_index().to_json(orient="records", indent=2)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sweep",
        help="run one spec over a grid of values; 'sweep compare DIR' tabulates the variants",
        description=__doc__.split("\n\n")[1],
    )
    _spec_options(p)
    vary_option(p)
    p.add_argument("--resume", metavar="SWEEP_DIR",
                   help="run a sweep's missing/failed variants, with the job flags given "
                   "(--walltime, --queue, --nodes, --account...)")  # fmt: skip
    p.add_argument("--backend", default="auto", choices=("auto", "local", "slurm", "pbs"),
                   help="auto (default): the system's scheduler; local runs each here")  # fmt: skip
    p.add_argument("--max-concurrent", type=int, default=None, metavar="N",
                   help="at most N array elements at once (Slurm %%N, PBS Pro %%N)")  # fmt: skip
    p.add_argument("--wait", action="store_true",
                   help="wait for a scheduler's array to end, then print the comparison; exit "
                   f"{NEVER_RUNS_EXIT} if the scheduler says a variant can never run")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the states (or table) as JSON")
    p.add_argument("--dry-run", action="store_true",
                   help="print the variants and the script they would run; submit nothing")  # fmt: skip
    p.set_defaults(func=cmd_sweep)
