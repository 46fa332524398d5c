"""The profiler factory: one torch.profiler per rank, traces and tables named by rank and world size.

Files it writes (the run directory contract in docs/architecture.md):

- ``<trace_dir>/<prefix>-<rank>-of-<world>.json[.gz]`` — the first trace of this rank;
- ``<trace_dir>/<prefix>_cycle<k>-<rank>-of-<world>.json[.gz]`` — trace ``k`` (k >= 1) when the
  schedule repeats; the name still ends in ``-<rank>-of-<world>``, which is what loaders parse;
- ``<tables_dir>/<same stem>.txt`` — ``key_averages().table(sort_by=..., row_limit=-1)`` as
  the ATPESC guide writes it: sorted by ``self_xpu_time_total`` on XPU, ``self_cuda_time_total``
  on CUDA, ``self_cpu_time_total`` when only the CPU is profiled (:func:`table_sort_key`), every
  row, under one line that names the sort key.

Shapes and memory are recorded by default, as in both guides' examples
(``profile(..., record_shapes=True, profile_memory=True)``): ops carry ``Input Dims`` and the
trace holds ``[memory]`` events. Pass ``record_shapes=False, profile_memory=False`` for a leaner
trace.

``trace_dir`` defaults to ``$HPCPROF_RUN_DIR/traces`` (else ``./traces``); ``tables_dir`` to the
``tables/`` beside a folder named ``traces`` (a run directory's layout), else to ``tables/``
inside the trace folder you gave (:func:`default_tables_dir`). Each file is written to the rank's
hidden ``.partial-<rank>/`` folder first and then renamed, so a rank that crashes while exporting
never leaves a torn file and never touches the other ranks' files.

>>> import torch
>>> prof = make_profiler(schedule={"wait": 0, "warmup": 1, "active": 1}, rank=0, world_size=1,
...                      trace_dir="traces")        # doctest: +SKIP
>>> with prof:                                    # doctest: +SKIP
...     for _ in range(3):
...         torch.ones(8).sum(); prof.step()
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hpcprof_kit.errors import KitWarning, SpecError
from hpcprof_kit.paths import current_run_dir
from hpcprof_kit.profiling.schedule import Schedule, as_schedule, recorded_steps  # noqa: F401
from hpcprof_kit.profiling.select import parse_activities, rank_is_selected

# Sort key of the per-rank summary table, by the device profiled: the ATPESC guide sorts by
# "self_xpu_time_total" on Aurora, the CUDA spelling is its twin; a CPU-only run sorts by self CPU.
SORT_KEYS: dict[str, str] = {
    "xpu": "self_xpu_time_total",
    "cuda": "self_cuda_time_total",
    "cpu": "self_cpu_time_total",
}
SORT_CPU = SORT_KEYS["cpu"]
SORT_DEVICE = "self_device_time_total"  # torch's device-neutral key (kept for older callers)
TABLE_ROWS = -1  # every row: the guide's row_limit=-1
# torch's note when a second cycle starts; misleading here, where each cycle has its own file
CLEARS_EVENTS = "Warning: Profiler clears events at the end of each cycle"
PROBE_STEPS = 10_000  # how far a schedule callable of your own is searched for its first record


def trace_name(prefix: str, rank: int, world_size: int, cycle: int = 0, gzip: bool = False) -> str:
    """File name of one rank's trace for cycle ``cycle`` of the schedule.

    >>> trace_name("trace", 1, 4)
    'trace-1-of-4.json'
    >>> trace_name("trace", 1, 4, cycle=2, gzip=True)
    'trace_cycle2-1-of-4.json.gz'
    """
    stem = prefix if cycle == 0 else f"{prefix}_cycle{cycle}"
    return f"{stem}-{rank}-of-{world_size}.json" + (".gz" if gzip else "")


def table_sort_key(activities: list[str] | tuple[str, ...] | str) -> str:
    """The ``sort_by`` key of the summary table for the activities profiled (names as
    :func:`~hpcprof_kit.profiling.select.parse_activities` returns them).

    >>> table_sort_key(["cpu", "xpu"]), table_sort_key(["cpu", "cuda"]), table_sort_key(["cpu"])
    ('self_xpu_time_total', 'self_cuda_time_total', 'self_cpu_time_total')
    """
    names = [activities] if isinstance(activities, str) else list(activities)
    device = next((a for a in names if a != "cpu"), "cpu")
    return SORT_KEYS.get(device, SORT_DEVICE)


def summary_table(prof: Any, sort_by: str, rows: int = TABLE_ROWS) -> str:
    """``prof.key_averages().table(sort_by=..., row_limit=...)`` under a line naming the key."""
    table = prof.key_averages().table(sort_by=sort_by, row_limit=rows)
    shown = "all rows" if rows < 0 else f"top {rows} rows"
    return f"key_averages().table(sort_by={sort_by!r}, row_limit={rows}): {shown}\n{table}\n"


def default_trace_dir() -> Path:
    """``$HPCPROF_RUN_DIR/traces`` inside a job, else ``./traces``."""
    run_dir = current_run_dir()
    return (run_dir if run_dir else Path.cwd()) / "traces"


def default_tables_dir(trace_dir: str | os.PathLike[str]) -> Path:
    """Where the summary tables go: beside a ``traces`` folder (a run directory's ``tables/``),
    else inside the trace folder, so they never land in a folder you did not name.

    >>> default_tables_dir("runs/x/traces").as_posix()
    'runs/x/tables'
    >>> default_tables_dir("/scratch/mlp").as_posix()
    '/scratch/mlp/tables'
    """
    path = Path(trace_dir)
    return path.parent / "tables" if path.name == "traces" else path / "tables"


class TraceWriter:
    """The ``on_trace_ready`` handler: writes one trace (and its summary table) per cycle."""

    def __init__(self, trace_dir: Path, tables_dir: Path, prefix: str, rank: int,
                 world_size: int, gzip: bool, sort_by: str,
                 then: Callable[[Any], None] | None = None, rows: int = TABLE_ROWS) -> None:  # fmt: skip
        self.trace_dir, self.tables_dir = trace_dir, tables_dir
        self.prefix, self.rank, self.world_size = prefix, rank, world_size
        self.gzip, self.sort_by, self.rows = gzip, sort_by, rows
        self.then = then  # your own on_trace_ready, called after the kit's files are written
        self.cycle = 0
        self.written: list[Path] = []

    def _free_name(self) -> str:
        # A file already there (a rerun into the same directory) is never overwritten.
        while True:
            name = trace_name(self.prefix, self.rank, self.world_size, self.cycle, self.gzip)
            if not (self.trace_dir / name).exists():
                return name
            self.cycle += 1

    def __call__(self, prof: Any) -> None:
        name = self._free_name()
        self.cycle += 1
        # This rank's own hidden folder: another rank removing a shared one between this
        # rank's mkdir and its export would lose this rank's trace.
        partial = self.trace_dir / f".partial-{self.rank}"
        partial.mkdir(parents=True, exist_ok=True)
        tmp = partial / name
        prof.export_chrome_trace(str(tmp))
        final = self.trace_dir / name
        os.replace(tmp, final)
        self.written.append(final)
        self.tables_dir.mkdir(parents=True, exist_ok=True)
        stem = name.split(".json")[0]
        table = summary_table(prof, self.sort_by, self.rows)
        (self.tables_dir / f"{stem}.txt").write_text(table)
        with contextlib.suppress(OSError):  # a second writer of this rank may be using it
            partial.rmdir()
        if self.then is not None:
            self.then(prof)


class RankProfiler:
    """A ``torch.profiler.profile`` for one rank, plus where its files went (``.traces``).

    The torch profiler costs every step it is open several percent, recording or not, so it is
    opened only at the first warmup (or record) step and, with a finite schedule
    (``repeat >= 1``), closed as soon as its last cycle is saved. Step numbers stay global:
    ``ProfilerStep#N`` counts every ``step()`` from the start, as with torch's own profiler.
    """

    enabled = True

    def __init__(
        self,
        profile: Any,
        writer: TraceWriter,
        emit_itt: bool = False,
        first_step: int = 0,
        last_step: int | None = None,
        first_record: tuple[int | None, str] = (None, ""),
    ) -> None:
        self.profile = profile
        self.writer = writer
        self.first_record = first_record  # (first recorded step, how the schedule gets there)
        self.first_step = first_step  # the first warmup or record step: opened there
        self.last_step = last_step  # step() calls after which nothing more is recorded
        self.steps = 0
        self.opened = False
        self.closed = False
        self._itt = None
        if emit_itt:
            import torch.autograd.profiler as autograd_profiler

            self._itt = autograd_profiler.emit_itt()

    def __enter__(self) -> RankProfiler:
        if self._itt is not None:
            self._itt.__enter__()
        if self.first_step <= 0:
            self._open()
        return self

    def _open(self) -> None:
        """Open torch's profiler at global step ``self.steps`` with public calls only: its
        ``step()`` counts the idle steps before (nothing is started while the schedule says
        NONE), ``start()`` at the last idle one, and one more ``step()`` enters this step, so
        the trace says ``ProfilerStep#N`` with the global N."""
        prof = self.profile
        for _ in range(self.steps - 1):
            prof.step()
        prof.__enter__()
        self.opened = True
        if self.steps:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message=CLEARS_EVENTS)
                prof.step()

    def __exit__(self, *exc: Any) -> None:
        try:
            if self.opened and not self.closed:
                self.profile.__exit__(*exc)
                self.closed = True
        finally:
            if self._itt is not None:
                self._itt.__exit__(*exc)
        if exc[0] is None and not self.writer.written:
            warnings.warn(self.no_trace_note(), KitWarning, stacklevel=2)

    def no_trace_note(self) -> str:
        """Why this rank wrote no trace: where the schedule first records, and the step count."""
        first, how = self.first_record
        calls = f"prof.step() was called {self.steps} time{'s' if self.steps != 1 else ''}"
        where = f"rank {self.writer.rank} wrote no trace"
        if first is None:
            return (
                f"{where}: your schedule records none of the first {PROBE_STEPS} steps and "
                f"{calls}; check the schedule callable"
            )
        return (
            f"{where}: the schedule first records step {first} ({how}), but {calls}; call "
            f"prof.step() once per iteration inside the with block and run more than {first} "
            "steps, or shorten the schedule"
        )

    def step(self) -> None:
        if self.closed:
            return
        if self.opened:
            with warnings.catch_warnings():  # each cycle has its own file here: nothing is lost
                warnings.filterwarnings("ignore", message=CLEARS_EVENTS)
                self.profile.step()
        self.steps += 1
        if not self.opened and self.steps >= self.first_step:
            self._open()
        elif self.last_step is not None and self.steps >= self.last_step:
            self.profile.__exit__(None, None, None)  # the last trace was saved in this step
            self.closed = True

    @property
    def traces(self) -> list[Path]:
        return list(self.writer.written)

    def __getattr__(self, name: str) -> Any:  # key_averages(), events(), ...
        return getattr(self.profile, name)


class NoProfiler:
    """What an unprofiled rank gets: the same ``with``/``.step()`` surface, doing nothing.

    With ``HPCPROF_EMIT_ITT=1`` (set by the unitrace wrapper) it still wraps the loop in
    ``torch.autograd.profiler.emit_itt()`` so unitrace sees PyTorch ops as ITT tasks.
    """

    enabled = False
    traces: list[Path] = []

    def __init__(self, emit_itt: bool = False) -> None:
        self._itt = None
        if emit_itt:
            import torch.autograd.profiler as autograd_profiler

            self._itt = autograd_profiler.emit_itt()

    def __enter__(self) -> NoProfiler:
        if self._itt is not None:
            self._itt.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._itt is not None:
            self._itt.__exit__(*exc)

    def step(self) -> None:
        """Nothing to do: this rank is not profiled."""


def emit_itt_requested(env: dict[str, str] | None = None) -> bool:
    """True when ``HPCPROF_EMIT_ITT=1`` asks for ITT ranges (the unitrace wrapper sets it)."""
    return (os.environ if env is None else env).get("HPCPROF_EMIT_ITT", "") == "1"


def make_profiler(
    schedule: Schedule | dict[str, int] | Callable[[int], Any] | None = None,
    activities: str | list[Any] | Any = "auto",
    *,
    record_shapes: bool = True,
    profile_memory: bool = True,
    with_stack: bool = False,
    with_flops: bool = False,
    trace_dir: str | os.PathLike[str] | None = None,
    tables_dir: str | os.PathLike[str] | None = None,
    rank: int = 0,
    world_size: int = 1,
    local_rank: int | None = None,
    ranks: str | list[int] = "all",
    prefix: str = "trace",
    gzip: bool = False,
    on_trace_ready: Callable[[Any], None] | None = None,
    table_rows: int = TABLE_ROWS,
) -> RankProfiler | NoProfiler:
    """A profiler for this rank, or a do-nothing stand-in when ``ranks`` leaves this rank out.

    ``schedule``: a :class:`Schedule`, a dict of its fields, or torch's own
    ``torch.profiler.schedule(...)`` (any other ``step -> ProfilerAction`` callable works too;
    the profiler then stays open from the first step). ``ranks``: ``"all"``,
    ``"first-local"`` (local rank 0 of each node) or a list such as ``"0,3"`` / ``[0, 3]``.
    ``activities``: ``"auto"`` (CPU + the accelerator present), a comma list of ``cpu``,
    ``cuda``, ``xpu``, or ``torch.profiler.ProfilerActivity`` values. ``on_trace_ready``: your
    handler (e.g. ``torch.profiler.tensorboard_trace_handler(dir)``), called for each trace
    after the kit wrote its own file. A profiler that closes without having written a trace
    warns (:class:`~hpcprof_kit.errors.KitWarning`), naming the first recorded step and how
    many ``step()`` calls it saw. ``record_shapes`` and ``profile_memory`` are on, as in the
    guides; ``table_rows`` cuts the summary table (-1: every row, the guide's ``row_limit=-1``).

    >>> prof = make_profiler(rank=1, world_size=2, ranks="0")
    >>> prof.enabled
    False
    """
    import torch.profiler

    itt = emit_itt_requested()
    if not rank_is_selected(ranks, rank, world_size, local_rank):
        return NoProfiler(emit_itt=itt)
    sched, first_step, last_step, first_record = _schedule_plan(schedule)
    acts = parse_activities(activities)
    torch_acts = [getattr(torch.profiler.ProfilerActivity, a.upper()) for a in acts]
    tdir = Path(trace_dir) if trace_dir is not None else default_trace_dir()
    bdir = Path(tables_dir) if tables_dir is not None else default_tables_dir(tdir)
    if not prefix or "/" in prefix or prefix.endswith("-"):
        raise SpecError(
            f"trace prefix {prefix!r} cannot name a file; use letters, digits and '_' (e.g. 'trace')"
        )
    writer = TraceWriter(tdir, bdir, prefix, rank, world_size, gzip, table_sort_key(acts),
                         on_trace_ready, rows=table_rows)  # fmt: skip
    tdir.mkdir(parents=True, exist_ok=True)
    profile = torch.profiler.profile(
        activities=torch_acts,
        schedule=sched,
        on_trace_ready=writer,
        record_shapes=record_shapes,
        profile_memory=profile_memory,
        with_stack=with_stack,
        with_flops=with_flops,
    )
    return RankProfiler(profile, writer, itt, first_step, last_step, first_record)


def _schedule_plan(schedule: Any) -> tuple[Any, int, int | None, tuple[int | None, str]]:
    """(torch schedule callable, step to open at, step after which to close or None,
    (first recorded step, how the schedule gets there)) for any accepted ``schedule``."""
    import torch.profiler

    if callable(schedule) and not isinstance(schedule, Schedule):
        from hpcprof_kit.profiling.schedule import from_torch

        if from_torch(schedule) is None:  # your own callable: open at once, never close early
            record = (torch.profiler.ProfilerAction.RECORD,
                      torch.profiler.ProfilerAction.RECORD_AND_SAVE)  # fmt: skip
            first = next((n for n in range(PROBE_STEPS) if schedule(n) in record), None)
            return schedule, 0, None, (first, "your schedule callable")
    sched = as_schedule(schedule)
    cycles = sched.repeat * sched.cycle_length
    last_step = sched.skip_first + cycles if sched.repeat > 0 else None
    how = f"skip_first={sched.skip_first} + wait={sched.wait} + warmup={sched.warmup}"
    return (
        sched.torch_schedule(),
        sched.skip_first + sched.wait,
        last_step,
        (sched.first_recorded_step(), how),
    )
