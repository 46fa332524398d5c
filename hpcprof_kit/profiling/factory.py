"""The profiler factory: one torch.profiler per rank, traces and tables named by rank and world size.

Files it writes (the run directory contract in docs/architecture.md):

- ``<trace_dir>/<prefix>-<rank>-of-<world>.json[.gz]`` — the first trace of this rank;
- ``<trace_dir>/<prefix>_cycle<k>-<rank>-of-<world>.json[.gz]`` — trace ``k`` (k >= 1) when the
  schedule repeats; the name still ends in ``-<rank>-of-<world>``, which is what loaders parse;
- ``<tables_dir>/<same stem>.txt`` — ``key_averages().table()`` sorted by self device time
  (self CPU time when only the CPU is profiled).

``trace_dir`` defaults to ``$HPCPROF_RUN_DIR/traces`` (else ``./traces``) and ``tables_dir`` to
the ``tables/`` beside it. Each file is written to a hidden ``.partial/`` folder first and then
renamed, so a rank that crashes while exporting never leaves a torn file and never touches the
other ranks' files.

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
import sys
from pathlib import Path
from typing import Any

from hpcprof_kit.errors import SpecError
from hpcprof_kit.paths import current_run_dir
from hpcprof_kit.profiling.schedule import Schedule, as_schedule
from hpcprof_kit.profiling.select import parse_activities, rank_is_selected

# Sort keys of the per-rank summary table; since torch 2.4 the device key covers CUDA and XPU.
SORT_DEVICE = "self_device_time_total"
SORT_CPU = "self_cpu_time_total"
TABLE_ROWS = 40


def trace_name(prefix: str, rank: int, world_size: int, cycle: int = 0, gzip: bool = False) -> str:
    """File name of one rank's trace for cycle ``cycle`` of the schedule.

    >>> trace_name("trace", 1, 4)
    'trace-1-of-4.json'
    >>> trace_name("trace", 1, 4, cycle=2, gzip=True)
    'trace_cycle2-1-of-4.json.gz'
    """
    stem = prefix if cycle == 0 else f"{prefix}_cycle{cycle}"
    return f"{stem}-{rank}-of-{world_size}.json" + (".gz" if gzip else "")


def default_trace_dir() -> Path:
    """``$HPCPROF_RUN_DIR/traces`` inside a job, else ``./traces``."""
    run_dir = current_run_dir()
    return (run_dir if run_dir else Path.cwd()) / "traces"


class TraceWriter:
    """The ``on_trace_ready`` handler: writes one trace (and its summary table) per cycle."""

    def __init__(self, trace_dir: Path, tables_dir: Path, prefix: str, rank: int,
                 world_size: int, gzip: bool, sort_by: str) -> None:  # fmt: skip
        self.trace_dir, self.tables_dir = trace_dir, tables_dir
        self.prefix, self.rank, self.world_size = prefix, rank, world_size
        self.gzip, self.sort_by = gzip, sort_by
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
        partial = self.trace_dir / ".partial"
        partial.mkdir(parents=True, exist_ok=True)
        tmp = partial / name
        prof.export_chrome_trace(str(tmp))
        final = self.trace_dir / name
        os.replace(tmp, final)
        self.written.append(final)
        self.tables_dir.mkdir(parents=True, exist_ok=True)
        stem = name.split(".json")[0]
        table = prof.key_averages().table(sort_by=self.sort_by, row_limit=TABLE_ROWS)
        (self.tables_dir / f"{stem}.txt").write_text(table + "\n")
        with contextlib.suppress(OSError):  # another rank may still be exporting into it
            partial.rmdir()


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
    ) -> None:
        self.profile = profile
        self.writer = writer
        # Opening late means resuming torch's step counter; a build without it opens at once.
        aligned = all(hasattr(profile, a) for a in ("step_num", "current_action", "schedule"))
        self.first_step = first_step if aligned else 0
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
        if self.steps:  # resume torch's counter at this global step
            prof = self.profile
            prof.step_num = self.steps
            prof.current_action = prof.schedule(self.steps)
            if hasattr(prof, "_prev_schedule_action"):
                prof._prev_schedule_action = prof.current_action
        self.profile.__enter__()
        self.opened = True

    def __exit__(self, *exc: Any) -> None:
        try:
            if self.opened and not self.closed:
                self.profile.__exit__(*exc)
                self.closed = True
        finally:
            if self._itt is not None:
                self._itt.__exit__(*exc)

    def step(self) -> None:
        if self.closed:
            return
        if self.opened:
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
    schedule: Schedule | dict[str, int] | None = None,
    activities: str | list[str] = "auto",
    *,
    record_shapes: bool = False,
    profile_memory: bool = False,
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
) -> RankProfiler | NoProfiler:
    """A profiler for this rank, or a do-nothing stand-in when ``ranks`` leaves this rank out.

    ``ranks``: ``"all"``, ``"first-local"`` (local rank 0 of each node) or a list such as
    ``"0,3"`` / ``[0, 3]``. ``activities``: ``"auto"`` (CPU + the accelerator present) or a
    comma list of ``cpu``, ``cuda``, ``xpu``.

    >>> prof = make_profiler(rank=1, world_size=2, ranks="0")
    >>> prof.enabled
    False
    """
    import torch.profiler

    sched = as_schedule(schedule)
    itt = emit_itt_requested()
    if not rank_is_selected(ranks, rank, world_size, local_rank):
        return NoProfiler(emit_itt=itt)
    acts = parse_activities(activities)
    torch_acts = [getattr(torch.profiler.ProfilerActivity, a.upper()) for a in acts]
    tdir = Path(trace_dir) if trace_dir is not None else default_trace_dir()
    bdir = Path(tables_dir) if tables_dir is not None else tdir.parent / "tables"
    if not prefix or "/" in prefix or prefix.endswith("-"):
        raise SpecError(
            f"trace prefix {prefix!r} cannot name a file; use letters, digits and '_' (e.g. 'trace')"
        )
    sort_by = SORT_DEVICE if any(a != "cpu" for a in acts) else SORT_CPU
    writer = TraceWriter(tdir, bdir, prefix, rank, world_size, gzip, sort_by)
    tdir.mkdir(parents=True, exist_ok=True)
    profile = torch.profiler.profile(
        activities=torch_acts,
        schedule=sched.torch_schedule(),
        on_trace_ready=writer,
        record_shapes=record_shapes,
        profile_memory=profile_memory,
        with_stack=with_stack,
        with_flops=with_flops,
    )
    cycles = sched.repeat * (sched.wait + sched.warmup + sched.active)
    last_step = sched.skip_first + cycles if sched.repeat > 0 else None
    first_step = sched.skip_first + sched.wait
    return RankProfiler(profile, writer, emit_itt=itt, first_step=first_step, last_step=last_step)


def compile_note(compiling: bool, profiling: bool, *, stream: Any = None) -> str | None:
    """Say (and print) that ``record_function`` ranges vanish inside ``torch.compile``d code.

    >>> text = compile_note(True, True, stream=sys.stdout)  # doctest: +ELLIPSIS
    note: torch.compile is on: record_function ranges inside compiled regions are ignored...
    """
    if not (compiling and profiling):
        return None
    text = (
        "note: torch.compile is on: record_function ranges inside compiled regions are ignored "
        "(the trace shows the compiled graph as one block); profile once without --compile to "
        "see your own ranges"
    )
    print(text, file=stream if stream is not None else sys.stderr)
    return text


def recorded_steps(trace_path: str | os.PathLike[str]) -> list[int]:
    """The ``ProfilerStep#N`` numbers a trace holds (``.json`` or ``.json.gz``), sorted.

    >>> recorded_steps("traces/trace-0-of-2.json")  # doctest: +SKIP
    [2, 3]
    """
    import gzip
    import json
    import re

    path = Path(trace_path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        events = json.load(fh).get("traceEvents", [])
    found = {
        m.group(1)
        for e in events
        if (m := re.fullmatch(r"ProfilerStep#(\d+)", str(e.get("name", ""))))
    }
    return sorted(int(n) for n in found)
