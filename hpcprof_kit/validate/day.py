"""The workshop day's time table, recomputed from the notebooks (``hpcprof-kit validate
--timing``; docs/instructors.md holds it).

The method, per notebook and per ``##`` section of it:

- **reading**: the words of its markdown and code cells at :data:`WORDS_PER_MIN`;
- **running**: :data:`CELL_MIN` per code cell, to run it and read what it prints;
- **exercises**: :data:`EXERCISE_MIN` per exercise (a code cell that calls a ``check_...(``
  helper), to type an answer, check it and try again;
- **machine**: the notebook's wall seconds in a headless run with the guide's recipe
  (:data:`MACHINE_S`, measured with ``hpcprof-kit validate --timing --measure``), all of it on
  the core path: Run All runs an optional section's cells too.

A section whose heading ends with ``(optional)`` is off the core path: its reading, running
and exercises count apart. The core path is the welcome (:data:`WELCOME_MIN`) plus every
notebook's core minutes; breaks, lunch and the closing discussion are outside it, and it must
stay within :data:`CORE_LIMIT_MIN`.

>>> round(minutes(words=400, cells=2, exercises=1), 1)
8.0
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

WORDS_PER_MIN = 200  # reading speed of technical prose (and the code beside it)
CELL_MIN = 0.5  # run a code cell and read its output
EXERCISE_MIN = 5.0  # type an answer, check it, try again
WELCOME_MIN = 20  # make env / make lab checked, hpcprof-kit doctor
CORE_LIMIT_MIN = 270  # 4.5 hours
# outside the core path: two breaks, lunch and the closing discussion of each attendee's run
BREAKS_MIN = {"break after 02": 15, "lunch after 05": 60, "break after 08": 15,
              "closing discussion": 30}  # fmt: skip
OPTIONAL = re.compile(r"\(optional\)\s*$", re.IGNORECASE)
CHECK = re.compile(r"\bcheck_\w+\(")
# Wall seconds of each notebook in one headless run with the guide's recipe (nbconvert
# --execute, one notebook after another, on the 2-core test machine shared with other work:
# docs/instructors.md gives the load); `hpcprof-kit validate --timing --measure` measures again.
MACHINE_S = {
    "00_quickstart": 13,
    "01_device_discovery": 8,
    "02_xpu_code_changes": 6,
    "03_ddp_with_mpi": 45,
    "04_profiler_schedules": 17,
    "05_reading_traces": 119,
    "06_vendor_profilers": 18,
    "07_affinity_exercise": 29,
    "08_sequence_parallel_timing": 52,
    "09_capstone_diagnosis": 17,
}


def minutes(words: int, cells: int, exercises: int) -> float:
    """Attendee minutes of ``words`` to read, ``cells`` code cells and ``exercises`` checks."""
    return words / WORDS_PER_MIN + cells * CELL_MIN + exercises * EXERCISE_MIN


@dataclass
class Section:
    """One ``##`` section of a notebook (the cells before the first heading are ``(top)``)."""

    title: str
    optional: bool = False
    words: int = 0
    cells: int = 0
    exercises: int = 0

    @property
    def minutes(self) -> float:
        return minutes(self.words, self.cells, self.exercises)


@dataclass
class Row:
    """A notebook's line of the table."""

    notebook: str
    machine_s: float
    core_min: float
    optional_min: float
    optional: list[str] = field(default_factory=list)


def sections(path: str | os.PathLike[str]) -> list[Section]:
    """The sections of the notebook at ``path``, each with its words, code cells and checks."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    out = [Section("(top)")]
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            heads = [ln for ln in cell.source.splitlines() if re.match(r"^##\s", ln)]
            if heads:
                title = heads[0].lstrip("#").strip()
                out.append(Section(title, bool(OPTIONAL.search(title))))
        elif cell.cell_type == "code":
            out[-1].cells += 1
            out[-1].exercises += bool(CHECK.search(cell.source))
        out[-1].words += len(cell.source.split())
    return out


def row(path: str | os.PathLike[str], machine_s: dict[str, float] | None = None) -> Row:
    """The table's row of the notebook at ``path``."""
    name = Path(path).stem
    secs = sections(path)
    machine = (MACHINE_S if machine_s is None else machine_s).get(name, 0.0)
    core = sum(s.minutes for s in secs if not s.optional) + machine / 60
    extra = sum(s.minutes for s in secs if s.optional)
    return Row(name, machine, core, extra, [s.title for s in secs if s.optional])


def day_rows(folder: str | os.PathLike[str] = "notebooks") -> list[Row]:
    """A row per notebook of ``folder``, in order."""
    return [row(p) for p in sorted(Path(folder).glob("[0-9][0-9]_*.ipynb"))]


def _up(m: float) -> int:
    """Minutes rounded up to the next whole minute."""
    return int(math.ceil(m - 1e-9))


def table_markdown(rows: list[Row]) -> str:
    """The time table as docs/instructors.md holds it: a line per notebook (machine seconds,
    core and optional minutes rounded up, the optional sections), then the core path."""
    lines = [
        "| notebook | machine (s) | core (min) | optional (min) | optional sections |",
        "|---|---:|---:|---:|---|",
        f"| welcome: `make env` / `make lab` checked, `hpcprof-kit doctor` | - | {WELCOME_MIN} "
        "| - | |",
    ]
    for r in rows:
        opt = "; ".join(re.sub(r"\s*\(optional\)\s*$", "", t, flags=re.I) for t in r.optional)
        lines.append(f"| `{r.notebook}` | {r.machine_s:.0f} | {_up(r.core_min)} | "
                     f"{_up(r.optional_min) if r.optional else '-'} | {opt} |")  # fmt: skip
    core = WELCOME_MIN + sum(_up(r.core_min) for r in rows)
    extra = sum(_up(r.optional_min) for r in rows if r.optional)
    lines.append(f"| **core path** | {sum(r.machine_s for r in rows):.0f} | **{core}** "
                 f"({core / 60:.1f} h) | {extra} | |")  # fmt: skip
    return "\n".join(lines)


def day_text(rows: list[Row], start: str = "09:00") -> str:
    """The day around the core path: its breaks and the hour it ends."""
    core = core_minutes(rows)
    total = core + sum(BREAKS_MIN.values())
    h, m = (int(x) for x in start.split(":"))
    end = h * 60 + m + total
    pauses = ", ".join(f"{k} {v} min" for k, v in BREAKS_MIN.items())
    return (f"Core path {core} min ({core / 60:.1f} h, at most {CORE_LIMIT_MIN}); with {pauses}: "
            f"{start} to {end // 60:02d}:{end % 60:02d}, before any queue wait. The optional "
            f"sections add {sum(_up(r.optional_min) for r in rows if r.optional)} min.")  # fmt: skip


def core_minutes(rows: list[Row]) -> int:
    """The core path in minutes, as the table adds it up."""
    return WELCOME_MIN + sum(_up(r.core_min) for r in rows)


def measure(folder: str | os.PathLike[str] = "notebooks", out: str = "executed",
            kernel: str = "python3", timeout: int = 600) -> dict[str, float]:  # fmt: skip
    """Run each notebook of ``folder`` headless with the guide's recipe, one after another, and
    return its wall seconds (a notebook that failed is left out, and said)."""
    env = {**os.environ, "KINETO_LOG_LEVEL": "6"}
    jupyter = Path(sys.executable).with_name("jupyter")
    found = {}
    for path in sorted(Path(folder).glob("[0-9][0-9]_*.ipynb")):
        start = time.monotonic()
        done = subprocess.run(
            [str(jupyter), "nbconvert", "--to", "notebook", "--execute",
             f"--ExecutePreprocessor.kernel_name={kernel}",
             f"--ExecutePreprocessor.timeout={timeout}", "--output-dir", out, str(path)],
            env=env, capture_output=True, text=True, check=False,
        )  # fmt: skip
        seconds = time.monotonic() - start
        print(f"{path.stem}: {'exit 0' if done.returncode == 0 else 'FAILED'} in {seconds:.0f} s",
              flush=True)  # fmt: skip
        if done.returncode == 0:
            found[path.stem] = round(seconds)
    return found
