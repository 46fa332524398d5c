"""Sweeps: one job spec, a grid of values, one run directory per variant, one comparison.

A grid maps a field to the values it takes: a :class:`JobSpec` field (``nodes``, ``binding``,
``ranks_per_node``...) or an app argument written as its flag (``--dtype``, ``--compile``).
Every combination is a variant; its run directory is made as :func:`submit` makes one, inside
the sweep directory ``runs/sweep_<example>_<system>_<stamp>/``, whose ``sweep.json`` keeps the
grid and each variant's values, run directory and state. A flag given ``True`` is added alone,
``False`` leaves it out; any other value follows its flag as its text (``--dtype bfloat16``,
``--seed 0``): a value is never judged by its truth.

Locally the variants run one after another; on Slurm they are one job array
(``hpcprof_kit.jobs.sweep_array``). Running a sweep again runs only its variants that are
missing or did not complete, each into a fresh run directory: nothing written is overwritten.

>>> from hpcprof_kit.jobs import JobSpec
>>> sweep = JobSpec(system="local", example="seqpar").sweep(
...     nodes=[1], **{"--dtype": ["float32", "bfloat16"]})
>>> [v.label for v in sweep.variants]
['nodes=1 --dtype=float32', 'nodes=1 --dtype=bfloat16']
>>> sweep.variants[1].spec.args
('--dtype', 'bfloat16')
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcprof_kit.errors import SpecError, SubmitError
from hpcprof_kit.jobs.rundir import now_iso
from hpcprof_kit.jobs.spec import JobSpec
from hpcprof_kit.jobs.sweep_grid import check_grid, label_text, parse_vary, variant_spec
from hpcprof_kit.paths import runs_root as default_runs_root

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from hpcprof_kit.jobs.handle import Job
    from hpcprof_kit.traces.plots.figure import Plot

__all__ = ["SWEEP_FILE", "Sweep", "Variant", "parse_vary"]

SWEEP_FILE = "sweep.json"
DONE = "COMPLETED"


@dataclass(frozen=True)
class Variant:
    """One point of the grid: its index, the values it sets and the spec they make."""

    index: int
    values: dict[str, Any]
    spec: JobSpec

    @property
    def label(self) -> str:
        return " ".join(f"{k}={label_text(v)}" for k, v in self.values.items())


class Sweep:
    """A grid of variants of one spec, kept in a sweep directory; ``run()`` and ``compare()``."""

    def __init__(self, base: JobSpec, grid: Mapping[str, Sequence[Any]],
                 runs_root: str | os.PathLike[str] | None = None,
                 path: Path | None = None) -> None:  # fmt: skip
        self.base = base
        self.grid = check_grid(grid)
        self.variants = [
            Variant(i, dict(zip(self.grid, combo, strict=True)),
                    variant_spec(base, dict(zip(self.grid, combo, strict=True))))
            for i, combo in enumerate(itertools.product(*self.grid.values()))
        ]  # fmt: skip
        self.runs_root = runs_root
        self.path = path
        # What a PBS server said of the queue's limits the record does not give (asked at
        # submission: ``sweep_array.learn_server_limits``); None: not asked, or no answer.
        self.server_limits: Any = None
        # Job flags given with this resume (``with_job_flags``), recorded when it runs.
        self.job_flags: dict[str, Any] = {}

    def __repr__(self) -> str:
        where = self.path or "not written yet"
        return f"Sweep({len(self.variants)} variants of {self.base.label}, {where})"

    # ---- checks ---------------------------------------------------------------------------
    def validate(self) -> Sweep:
        """Every variant against its system (SpecError names the variant), then the array limit."""
        for v in self.variants:
            try:
                v.spec.validate()
            except SpecError as exc:
                raise SpecError(f"variant {v.index} ({v.label}): {exc}") from None
        from hpcprof_kit.jobs.sweep_array import check_array_size

        check_array_size(self)
        return self

    # ---- the sweep directory --------------------------------------------------------------
    def create(self) -> Path:
        """Make the sweep directory and its ``sweep.json`` (checked first: nothing on bad input)."""
        if self.path is not None:
            return self.path
        self.validate()
        root = default_runs_root(self.runs_root).resolve()
        root.mkdir(parents=True, exist_ok=True)
        stem = f"sweep_{self.base.label}_{self.base.system}_{time.strftime('%Y%m%d-%H%M%S')}"
        for k in range(1000):
            path = root / (stem if k == 0 else f"{stem}-{k}")
            try:
                os.mkdir(path)  # atomic: never reuses a sweep directory
            except FileExistsError:
                continue
            self.path = path
            self._write(self._record())
            return path
        raise SubmitError(f"no free sweep directory name under {root} for {stem}")

    def _record(self) -> dict[str, Any]:
        return {
            "base": self.base.to_dict(),
            "grid": self.grid,
            "created_at": now_iso(),
            "variants": [
                {"index": v.index, "values": v.values, "label": v.label,
                 "run_dir": None, "state": "NEW"}
                for v in self.variants
            ],
        }  # fmt: skip

    def record(self) -> dict[str, Any]:
        """What ``sweep.json`` says now."""
        if self.path is None:
            return self._record()
        return json.loads((self.path / SWEEP_FILE).read_text())

    def _write(self, data: dict[str, Any]) -> None:
        assert self.path is not None
        fd, tmp = tempfile.mkstemp(prefix=".sweep.", suffix=".tmp", dir=self.path)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(json.dumps(data, indent=2) + "\n")
            os.replace(tmp, self.path / SWEEP_FILE)  # readers never see half a file
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise

    def mark(self, index: int, **changes: Any) -> None:
        """Record changes to one variant's entry in ``sweep.json``."""
        data = self.record()
        entry = data["variants"][index]
        if "run_dir" in changes and entry.get("run_dir") and entry["run_dir"] != changes["run_dir"]:
            entry.setdefault("earlier_runs", []).append(entry["run_dir"])  # kept, not replaced
        entry.update(changes)
        self._write(data)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Sweep:
        """A sweep from its directory (``sweep.json``), ready to ``run()`` again or compare."""
        folder = Path(path).resolve()
        try:
            data = json.loads((folder / SWEEP_FILE).read_text())
        except FileNotFoundError:
            raise SubmitError(
                f"{folder} has no {SWEEP_FILE}: it is not a sweep directory; pass the folder "
                "that sweep() printed (runs/sweep_...)"
            ) from None
        # The job flags earlier resumes gave stay in force: a rerun never falls back silently
        # to the walltime (or queue) that did not do.
        base = JobSpec.from_json(data["base"]).with_(**data.get("job_flags", {}))
        return cls(base, data["grid"], path=folder)

    def with_job_flags(self, flags: Mapping[str, Any]) -> Sweep:
        """This sweep with job flags (``walltime``, ``queue``, ``nodes``, ``account``...) set on
        the variants it runs again: checked now (SpecError names the variant, or the field the
        grid varies, which each variant keeps), recorded in ``sweep.json`` when they run."""
        for name, value in flags.items():
            if name in self.grid:
                shown = ",".join(label_text(v) for v in self.grid[name])
                flag = "--" + name.replace("_", "-")
                raise SpecError(
                    f"{flag} {value}: {name} is a field this sweep varies ({name}={shown}), "
                    f"so each variant keeps its own value on --resume; leave {flag} out, or "
                    f"start a new sweep with --vary {name}=... (the values you want)"
                )
        if not flags:
            return self
        resumed = Sweep(self.base.with_(**flags), self.grid, self.runs_root, self.path)
        resumed.job_flags = dict(flags)
        for v in resumed.pending() if self.path is not None else resumed.variants:
            try:
                v.spec.validate()
            except SpecError as exc:
                raise SpecError(
                    f"variant {v.index} ({v.label}) with the flags given: {exc}"
                ) from None
        return resumed

    def _record_job_flags(self, todo: Sequence[Variant]) -> None:
        """Keep the flags of this resume in ``sweep.json``: in force for later resumes
        (``job_flags``), and in each variant they reran and the resume's own entry."""
        data = self.record()
        data["job_flags"] = {**data.get("job_flags", {}), **self.job_flags}
        data.setdefault("resumes", []).append(
            {"at": now_iso(), "job_flags": self.job_flags, "variants": [v.index for v in todo]}
        )
        for v in todo:
            data["variants"][v.index]["job_flags"] = dict(data["job_flags"])
        self._write(data)

    # ---- running --------------------------------------------------------------------------
    def pending(self) -> list[Variant]:
        """Variants with no run yet or whose last run ended without completing (a variant
        still queued or running is left to finish: never two runs of it at once)."""
        entries = self.record()["variants"]
        busy = (DONE, "QUEUED", "RUNNING")
        return [v for v in self.variants if entries[v.index].get("state") not in busy]

    def run(self, backend: str = "auto", wait: bool = True,
            max_concurrent: int | None = None) -> Sweep:  # fmt: skip
        """Run the pending variants: locally one after another; on a scheduler as one array."""
        from hpcprof_kit.jobs.backends import choose_backend
        from hpcprof_kit.jobs.submission import check_backend

        check_backend(self.base.system_record(), backend)
        if self.path is not None:
            self.refresh()  # what an earlier run left queued or running may have ended since
        todo = self.pending()
        if not todo:
            return self
        # Chosen before the sweep directory is made: no scheduler here means nothing written.
        nodes = max(v.spec.nodes for v in todo)
        name = choose_backend(self.base.system_record(), backend, nodes=nodes)
        if name == "pbs":  # before anything is written: the server's limits may refuse the grid
            from hpcprof_kit.jobs.sweep_array import learn_server_limits

            learn_server_limits(self)
        self.create()
        if self.job_flags:
            self._record_job_flags(todo)
        if name == "local":
            self._run_local(todo)
            return self
        from hpcprof_kit.jobs.sweep_array import submit_array

        submit_array(self, todo, name, max_concurrent)
        if wait:
            self.wait()
        return self

    def _run_local(self, todo: Sequence[Variant]) -> None:
        from hpcprof_kit.jobs.submission import submit

        for v in todo:
            try:
                job = submit(v.spec, backend="local", runs_root=self.path)
            except SubmitError as exc:  # the others still run; this one says why
                self.mark(v.index, state="FAILED", note=str(exc))
                continue
            self.mark(v.index, run_dir=job.run_dir.name, job_id=job.job_id, state=job.state)
            self.mark(v.index, state=job.wait(progress=False))  # never two at once on the cores

    def preview(self, backend: str = "auto", max_concurrent: int | None = None) -> str:
        """What ``run(backend)`` would run, as text: the variants still to run, each one's
        command, and the script the scheduler would get; nothing is submitted or written
        (:func:`hpcprof_kit.jobs.sweep_preview.preview`)."""
        from hpcprof_kit.jobs.sweep_preview import preview

        todo = self.pending() if self.path is not None else None
        return preview(self, backend, todo, max_concurrent)

    def jobs(self) -> list[Job]:
        """The job handle of each variant that has a run directory."""
        from hpcprof_kit.jobs.handle import Job

        assert self.path is not None
        return [
            Job.from_run_dir(self.path / e["run_dir"])
            for e in self.record()["variants"]
            if e.get("run_dir") and e.get("job_id")
        ]

    def refresh(self) -> dict[int, str]:
        """Each variant's state, asked of its job and recorded in ``sweep.json``."""
        from hpcprof_kit.jobs.handle import Job

        assert self.path is not None
        states = {}
        for e in self.record()["variants"]:
            if e.get("run_dir") and e.get("job_id"):
                state = Job.from_run_dir(self.path / e["run_dir"]).refresh()
                if state != e.get("state"):
                    self.mark(e["index"], state=state)
                states[e["index"]] = state
            else:
                states[e["index"]] = e.get("state", "NEW")
        return states

    def wait(self, timeout: float | None = None) -> dict[int, str]:
        """Wait for every variant's job to end; their states by index."""
        from hpcprof_kit.jobs.handle import Job

        assert self.path is not None
        for e in self.record()["variants"]:
            if e.get("run_dir") and e.get("job_id"):
                state = Job.from_run_dir(self.path / e["run_dir"]).wait(timeout, progress=False)
                self.mark(e["index"], state=state)
        return self.refresh()

    # ---- comparison -----------------------------------------------------------------------
    def compare(self, write: bool = True) -> pd.DataFrame:
        """One row per variant (see :func:`hpcprof_kit.jobs.sweep_compare.compare_sweep`)."""
        from hpcprof_kit.jobs.sweep_compare import compare_sweep

        return compare_sweep(self, write=write)

    def step_samples(self) -> dict[str, list[float]]:
        """Each completed variant's step times (ms, every rank's), by its label: the input of
        ``noise_verdict(compare_variants(...))``
        (:func:`hpcprof_kit.jobs.sweep_compare.step_samples`)."""
        from hpcprof_kit.jobs.sweep_compare import step_samples

        return step_samples(self)

    def plot(self) -> Plot:
        """Step time per variant with its p10-p90 spread, and the table it draws."""
        from hpcprof_kit.jobs.sweep_compare import plot_sweep

        return plot_sweep(self.compare(write=False))

    def compare_runs(self, first: int, second: int) -> pd.DataFrame:
        """The op-level difference of two variants' traces
        (:func:`hpcprof_kit.traces.compare_runs`), labelled by their values."""
        from hpcprof_kit.traces import compare_runs, load

        dirs = []
        entries = self.record()["variants"]
        for index in (first, second):
            if not 0 <= index < len(entries):
                raise SpecError(
                    f"variant {index} is not in this sweep; pass an index 0-{len(entries) - 1}"
                )
        for index in (first, second):
            folder = (
                self.path / entries[index]["run_dir"] if entries[index].get("run_dir") else None
            )
            if folder is None or not any((folder / "traces").glob("*.json*")):
                raise SpecError(
                    f"variant {index} ({entries[index]['label']}) has no traces to compare; "
                    "sweep a spec with profile=True (or a tracer) and run it"
                )
            dirs.append(folder)
        labels = (f"{first}: {entries[first]['label']}", f"{second}: {entries[second]['label']}")
        return compare_runs(load(dirs[0]), load(dirs[1]), labels=labels)

    def ladder(self) -> pd.DataFrame:
        """Each rung's gain over the previous one (sweeps that change one field)."""
        from hpcprof_kit.jobs.sweep_compare import ladder

        return ladder(self.compare(write=False))
