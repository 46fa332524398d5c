"""A run's traces analysed as an MPI job: each MPI rank summarises its share of the rank files.

Under any launcher (``mpiexec``, ``srun``, ``mpiexec`` of PALS), rank 0 lists the trace files
and shares them out by size (largest first, each to the lightest MPI rank); a trace rank's
cycle files (``<prefix>_cycle<k>-<rank>-of-<world>.json``) travel together. Each MPI rank
loads one trace rank at a time with the kit's loader, keeps only its
:class:`~hpcprof_kit.traces.view.summary.RankSummary` (and writes it as ``summaries/rank-<r>.npz``),
so its memory is bounded by its largest file. The summaries are gathered to rank 0, which
combines them (:func:`~hpcprof_kit.traces.view.summary.combine`) into the same tables the
one-process analyses give, and writes ``tables/*.csv`` and ``plots/*.png``.

A file that fails to load is reported by name with the reason and the others complete
(:attr:`RunSummary.failures`); when no file loads at all the job fails. A Python error in
the analysis itself aborts the whole job (``MPI_Abort``) rather than leave rank 0 waiting.

    mpiexec -n 8 hpcprof-kit traces summary runs/train_aurora_N64_R12_.../ --mpi --out analysis/

>>> from hpcprof_kit.traces.reporting.mpi_summary import share
>>> share([30, 10, 20, 5], 2)
[[0, 3], [2, 1]]
"""

from __future__ import annotations

import json
import os
import pickle
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

from hpcprof_kit.errors import KitError, SpecError, TraceFormatError
from hpcprof_kit.traces.read.naming import rank_from_file_name
from hpcprof_kit.traces.reporting.summary_store import write_plots, write_summary, write_tables
from hpcprof_kit.traces.view.summary import RankSummary, RunSummary, combine, summarise_rank

# What a file that cannot be read raises from the loader: reported, the others go on.
LOAD_ERRORS = (KitError, OSError, ValueError, EOFError)


def world() -> Any:
    """``MPI.COMM_WORLD``; mpi4py is imported here, so the rest of the kit works without it."""
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise SpecError(
            f"--mpi needs mpi4py, which does not import here ({exc}); install it built "
            "against the site's MPI (pip install mpi4py, with the MPI module loaded), or "
            "drop --mpi to analyse in one process"
        ) from exc
    return MPI.COMM_WORLD


def rank_units(files: list[Path]) -> list[list[Path]]:
    """The files grouped by the trace rank their name says (its cycle files together); a
    file whose name says no rank is a unit alone.

    >>> [[f.name for f in u] for u in rank_units([Path("t-0-of-2.json"), Path("t_cycle1-0-of-2.json"), Path("x.json")])]
    [['t-0-of-2.json', 't_cycle1-0-of-2.json'], ['x.json']]
    """
    units: dict[Any, list[Path]] = {}
    for i, f in enumerate(files):
        rank = rank_from_file_name(f.name)[0]
        units.setdefault(("rank", rank) if rank is not None else ("file", i), []).append(f)
    return list(units.values())


def share(sizes: list[int], lanes: int) -> list[list[int]]:
    """Unit indexes per MPI rank: largest first, each to the lane with the fewest bytes so
    far (ties: the lower lane)."""
    load = [0] * lanes
    out: list[list[int]] = [[] for _ in range(lanes)]
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        lane = min(range(lanes), key=lambda w: (load[w], w))
        out[lane].append(i)
        load[lane] += sizes[i]
    return out


def summarise_unit(files: list[Path]) -> tuple[list[RankSummary], list[str], dict | None]:
    """Load one trace rank's files and summarise them: ``(summaries, warnings, failure)``;
    ``failure`` is ``{"file", "reason"}`` when the files do not load."""
    from hpcprof_kit.traces.table.loader import load

    names = ", ".join(str(f) for f in files)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            df = load([str(f) for f in files], workers=1)  # no forks inside an MPI rank
        except LOAD_ERRORS as exc:
            return [], [], {"file": names, "reason": f"{type(exc).__name__}: {exc}"}
    notes = [str(w.message) for w in caught]
    if len(df) == 0:  # the one-process table has no row of it either: listed, not an error
        why = (notes or ["it holds no complete (X) or instant (i) events"])[-1]
        return [], notes, {"file": names, "reason": f"no event loaded: {why}"}
    ranks = sorted(int(r) for r in df["rank"].unique())
    out = []
    for r in ranks:
        sub = df[df["rank"].to_numpy() == r] if len(ranks) > 1 else df
        sub.attrs = {"ranks": {r: df.attrs["ranks"].get(r, {})}}
        out.append(summarise_rank(sub))
    return out, notes, None


def _plan(paths: list[str], size: int) -> dict[str, Any]:
    """Rank 0's plan: the units and who does which, or the error that stops the job."""
    from hpcprof_kit.traces.table.loader import find_trace_files

    try:
        units = rank_units(find_trace_files(paths))
    except KitError as exc:
        return {"error": str(exc)}
    sizes = [sum(os.path.getsize(f) for f in unit) for unit in units]
    return {"units": units, "lanes": share(sizes, size)}


def _work(plan: dict, rank: int, summaries_dir: Path | None) -> dict[str, Any]:
    """This MPI rank's share: its summaries, loader warnings and failures. Each summary is
    kept pickled (about a quarter of its size as live tables) until the gather sends it."""
    mine: dict[str, Any] = {"summaries": [], "warnings": [], "failures": []}
    for i in plan["lanes"][rank]:
        got, notes, failure = summarise_unit(plan["units"][i])
        mine["warnings"] += notes
        if failure:
            mine["failures"].append(failure)
        for s in got:
            if summaries_dir is not None:
                write_summary(s, summaries_dir)
            mine["summaries"].append(pickle.dumps(s, protocol=pickle.HIGHEST_PROTOCOL))
    return mine


def run_summary(
    paths: list[str], out: str | os.PathLike[str] | None = None, comm: Any = None
) -> RunSummary | None:
    """Analyse the traces ``paths`` name across the MPI job; rank 0 returns the
    :class:`RunSummary` (and writes ``out/tables``, ``out/plots``, ``out/summaries`` when
    ``out`` is given), the other ranks None. Raises TraceFormatError on rank 0 when no
    file loaded.

    >>> run = run_summary(["runs/x/traces"], out="runs/x")   # doctest: +SKIP
    """
    comm = comm if comm is not None else world()
    rank, size = comm.Get_rank(), comm.Get_size()
    started = time.perf_counter()
    out = Path(out) if out is not None else None
    plan = comm.bcast(_plan(list(paths), size) if rank == 0 else None, root=0)
    if "error" in plan:
        if rank == 0:
            raise TraceFormatError(plan["error"])
        return None
    try:
        mine = _work(plan, rank, out / "summaries" if out is not None else None)
    except BaseException:  # a rank that fails here would leave rank 0 waiting in gather
        text = f"error: MPI rank {rank} failed; aborting the job\n{traceback.format_exc()}"
        print(text, end="", file=sys.stderr)
        sys.stderr.flush()
        if out is not None:  # the launcher may drop the output of ranks it kills in the abort
            out.mkdir(parents=True, exist_ok=True)
            (out / f"failed-mpi-rank-{rank}.txt").write_text(text)
        comm.Abort(1)
        raise  # pragma: no cover - Abort does not return
    gathered = comm.gather(mine, root=0)
    if rank != 0:
        return None
    return _finish(gathered, plan, out, size, time.perf_counter() - started)


def _finish(gathered: list[dict], plan: dict, out: Path | None, size: int, seconds: float):
    summaries = []
    for g in gathered:  # each MPI rank's pickles dropped as soon as they are read
        summaries += [pickle.loads(b) for b in g["summaries"]]
        g["summaries"] = []
    failures = [f for g in gathered for f in g["failures"]]
    for note in (n for g in gathered for n in g["warnings"]):
        print(f"warning: {note}", file=sys.stderr)
    for f in failures:
        print(f"error: {f['file']}: not analysed: {f['reason']}", file=sys.stderr)
    if not summaries:
        raise TraceFormatError(
            f"no trace file loaded: all {len(failures)} failed, each named above with the "
            "reason; check the path names one run's traces (hpcprof-kit traces summary PATH)"
        )
    run = combine(summaries, failures)
    if out is not None:
        write_tables(run, out / "tables")
        write_plots(run, out / "plots")
        record = {
            "files": sum(len(u) for u in plan["units"]),
            "ranks": len(summaries),
            "mpi_ranks": size,
            "seconds": round(seconds, 3),
            "failures": failures,
        }
        (out / "tables" / "analysis.json").write_text(json.dumps(record, indent=1) + "\n")
    return run
