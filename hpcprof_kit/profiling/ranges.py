"""Named ranges in your code: ``record_function``, ``@trace_func`` and ``capture`` regions.

(``from hpcprof_kit.profiling import capture, record_function, trace_func``: this module is
``ranges`` so that no module shadows the ``capture`` function.)

``record_function(name)`` and ``@trace_func`` put a named range into torch.profiler traces
(``traces.user_ranges(df)`` tabulates them). ``capture(name)`` marks a region to collect once,
and lets any of three profilers honour it.

``with capture("attention"):`` does, for whichever tool is watching:

- **nsys** (``--capture-range=cudaProfilerApi``): an NVTX range plus ``torch.cuda.profiler.start()``
  / ``stop()`` around the region, when CUDA is present;
- **unitrace** (``--conditional-collection``): an ITT range plus collection on/off around the
  region (``PTI_ENABLE_COLLECTION`` in this process's environment, and ``ittapi.resume()`` /
  ``pause()`` when the ``ittapi`` package is installed);
- **torch.profiler**: a ``record_function`` range, and, when ``HPCPROF_CAPTURE=torch`` is set
  (or a ``profiler=`` is passed), a profiler started at entry and stopped at exit, so the trace
  holds the region and nothing else. Its file is ``capture-<rank>-of-<world>.json`` in the
  run's ``traces/`` (``capture_cycle<k>-...`` for the k-th region after the first).

The app code stays the same; only the wrapper (or one environment variable) changes.

>>> import torch
>>> with capture("matmul"):
...     _ = torch.ones(4, 4) @ torch.ones(4, 4)
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, TypeVar

CAPTURE_VAR = "HPCPROF_CAPTURE"  # "torch": each capture() region becomes one torch.profiler trace
UNITRACE_COLLECTION_VAR = "PTI_ENABLE_COLLECTION"  # read by unitrace --conditional-collection

F = TypeVar("F", bound=Callable[..., Any])


def record_function(name: str):
    """``torch.profiler.record_function(name)``: a named range in torch.profiler traces (the
    ATPESC guide's ``with record_function("data_preprocessing"):``). Also a decorator.

    >>> with record_function("forward"):
    ...     pass
    """
    import torch.profiler

    return torch.profiler.record_function(name)


def trace_func(func: F | None = None, *, name: str | None = None) -> F:
    """Decorator: every call of the function becomes a ``record_function`` range named after it
    (its ``__qualname__``, a method's too), as the ``trace_func`` of the ALCF Polaris guide;
    ``@trace_func(name="...")`` picks another name. Ranges inside ``torch.compile``d code vanish.

    >>> @trace_func
    ... def forward(x):
    ...     return x * 2
    >>> forward(3)
    6
    """

    def wrap(f: F) -> F:
        label = name or f.__qualname__

        @functools.wraps(f)
        def inner(*args: Any, **kwargs: Any) -> Any:
            with record_function(label):
                return f(*args, **kwargs)

        return inner  # type: ignore[return-value]

    return wrap(func) if func is not None else wrap  # type: ignore[return-value]


def compile_note(compiling: bool, profiling: bool, *, stream: Any = None) -> str | None:
    """Say (and print) that ``record_function`` ranges vanish inside ``torch.compile``d code.

    >>> text = compile_note(True, True, stream=sys.stdout)  # doctest: +ELLIPSIS
    note: torch.compile is on: record_function ranges inside compiled regions are ignored...
    """
    if not (compiling and profiling):
        return None
    text = (
        "note: torch.compile is on: record_function ranges inside compiled regions are ignored "
        "(the trace shows the compiled graph as one block); ranges around the call of the "
        "compiled model, such as forward and backward, stay"
    )
    print(text, file=stream if stream is not None else sys.stderr)
    return text


class _CaptureTraces:
    """The torch.profiler used when ``HPCPROF_CAPTURE=torch``: one trace file per region."""

    writers: dict[Path, Any] = {}  # one per trace folder, so region k gets cycle k

    @classmethod
    def new_profiler(cls):
        import torch.profiler

        from hpcprof_kit.profiling.factory import (
            TraceWriter,
            default_tables_dir,
            default_trace_dir,
            table_sort_key,
        )
        from hpcprof_kit.profiling.select import available_activities
        from hpcprof_kit.ranks import ranks_from_env

        acts = available_activities()
        tdir = default_trace_dir()
        if tdir not in cls.writers:
            info = ranks_from_env(use_mpi=False)
            cls.writers[tdir] = TraceWriter(
                tdir, default_tables_dir(tdir), "capture", info.rank, info.world_size, False,
                table_sort_key(acts),
            )  # fmt: skip
        activities = [getattr(torch.profiler.ProfilerActivity, a.upper()) for a in acts]
        # shapes and memory on, as make_profiler does: the guides' defaults
        profile = torch.profiler.profile(
            activities=activities, record_shapes=True, profile_memory=True
        )
        return profile, cls.writers[tdir]


@contextmanager
def _cuda_range(name: str) -> Iterator[None]:
    import torch

    if not torch.cuda.is_available():
        yield
        return
    torch.cuda.nvtx.range_push(name)
    torch.cuda.profiler.start()
    try:
        yield
    finally:
        torch.cuda.synchronize()  # the region's kernels belong inside the range
        torch.cuda.profiler.stop()
        torch.cuda.nvtx.range_pop()


@contextmanager
def _itt_range(name: str) -> Iterator[None]:
    import torch.profiler.itt as itt

    from hpcprof_kit.profiling.factory import emit_itt_requested

    # Only under unitrace (its wrapper sets HPCPROF_EMIT_ITT=1): elsewhere leave the env alone.
    if not (emit_itt_requested() and itt.is_available()):
        yield
        return
    try:
        import ittapi  # optional: the real __itt_resume/__itt_pause
    except ImportError:
        ittapi = None
    before = os.environ.get(UNITRACE_COLLECTION_VAR)
    os.environ[UNITRACE_COLLECTION_VAR] = "1"
    if ittapi is not None:
        ittapi.resume()
    itt.range_push(name)
    try:
        yield
    finally:
        itt.range_pop()
        if ittapi is not None:
            ittapi.pause()
        if before is None:
            os.environ[UNITRACE_COLLECTION_VAR] = "0"
        else:
            os.environ[UNITRACE_COLLECTION_VAR] = before


@contextmanager
def capture(name: str, profiler: Any = None) -> Iterator[None]:
    """Mark a region for nsys, unitrace and torch.profiler at once (see the module text).

    ``profiler``: a ``torch.profiler.profile`` that is not running yet; it is started at entry
    and stopped at exit. Without it, ``HPCPROF_CAPTURE=torch`` makes one and writes its trace.
    """
    writer = None
    if profiler is None and os.environ.get(CAPTURE_VAR, "") == "torch":
        profiler, writer = _CaptureTraces.new_profiler()
    with ExitStack() as stack:
        if profiler is not None:
            profiler.start()
        try:
            stack.enter_context(_cuda_range(name))
            stack.enter_context(_itt_range(name))
            stack.enter_context(record_function(name))
            yield
        finally:
            stack.close()
            if profiler is not None:
                profiler.stop()
                if writer is not None:
                    writer(profiler)


class StepCapture:
    """``--capture-steps A-B``: one ``capture()`` region from the start of step A to the end of
    step B (steps counted from 0), each step inside it a ``ProfilerStep#N`` range, so a capture
    trace reads like a scheduled one. Steps outside the window run untouched.

    >>> window = StepCapture("1-2")
    >>> for step in range(4):
    ...     with window.around(step):
    ...         pass
    >>> window.captured
    [1, 2]
    """

    def __init__(self, steps: str | None, name: str = "capture_steps") -> None:
        self.first, self.last = parse_steps(steps) if steps else (-1, -2)
        self.name = name
        self.captured: list[int] = []
        self._region = ExitStack()

    @contextmanager
    def around(self, step: int) -> Iterator[None]:
        if step == self.first:
            self._region.enter_context(capture(f"{self.name} {self.first}-{self.last}"))
        inside = self.first <= step <= self.last
        try:
            if inside:
                with record_function(f"ProfilerStep#{step}"):
                    yield
                self.captured.append(step)
            else:
                yield
        finally:
            if step == self.last:
                self._region.close()

    def close(self) -> None:
        """End the region if the run stopped inside the window (fewer steps than asked)."""
        if self.first >= 0 and self.captured and self.captured[-1] < self.last:
            print(
                f"note: --capture-steps {self.first}-{self.last}: the run ended after step "
                f"{self.captured[-1]}; the capture holds steps {self.captured[0]}-"
                f"{self.captured[-1]}",
                file=sys.stderr,
            )
        self._region.close()


def parse_steps(text: str) -> tuple[int, int]:
    """``"3-4"`` -> (3, 4), ``"3"`` -> (3, 3); ValueError names the flag and the fix.

    >>> parse_steps("3-4"), parse_steps("7")
    ((3, 4), (7, 7))
    """
    first, _, last = str(text).partition("-")
    try:
        a, b = int(first), int(last or first)
    except ValueError:
        a, b = -1, -2
    if a < 0 or b < a:
        raise ValueError(f"--capture-steps {text!r} is not 'A-B' with 0 <= A <= B; e.g. 3-4")
    return a, b
