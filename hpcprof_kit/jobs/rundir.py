"""Run directories: one per submission, never reused, with a manifest updated at each state change.

>>> import tempfile
>>> from hpcprof_kit.jobs import JobSpec, RunDir
>>> run = RunDir.create(JobSpec(system="local", example="seqpar"), runs_root=tempfile.mkdtemp())
>>> run.path.name.startswith("seqpar_local_N1_R2_")
True
>>> run.manifest()["state"]
'NEW'
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from hpcprof_kit.errors import SubmitError
from hpcprof_kit.jobs.spec import JobSpec
from hpcprof_kit.paths import runs_root as default_runs_root

MANIFEST = "manifest.json"
LOCK = ".manifest.lock"  # serialises manifest updates (flock)
SUBFOLDERS = ("traces", "tables", "timings")


def now_iso() -> str:
    return datetime.now().astimezone().isoformat(timespec="seconds")


@dataclass(frozen=True)
class RunDir:
    """The folder of one run: ``job.sh``, ``spec.json``, ``manifest.json``, outputs, traces."""

    path: Path

    @classmethod
    def create(cls, spec: JobSpec, runs_root: str | os.PathLike[str] | None = None) -> RunDir:
        """Make a fresh run directory for ``spec`` (``-1``, ``-2``... when the second is taken)."""
        root = default_runs_root(runs_root).resolve()
        root.mkdir(parents=True, exist_ok=True)
        stem = (
            f"{spec.label}_{spec.system}_N{spec.nodes}_R{spec.ranks_per_node}_"
            f"{time.strftime('%Y%m%d-%H%M%S')}"
        )
        for k in range(1000):
            path = root / (stem if k == 0 else f"{stem}-{k}")
            try:
                os.mkdir(path)  # atomic: fails instead of reusing an existing run
            except FileExistsError:
                continue
            run = cls(path)
            for sub in SUBFOLDERS:
                (path / sub).mkdir()
            run.update(state="NEW", system=spec.system, example=spec.label)
            return run
        raise SubmitError(f"no free run directory name under {root} for {stem}; clean old runs")

    # ---- files -----------------------------------------------------------------------------
    @property
    def script(self) -> Path:
        return self.path / "job.sh"

    @property
    def stdout(self) -> Path:
        return self.path / "stdout"

    @property
    def stderr(self) -> Path:
        return self.path / "stderr"

    def write_new(self, name: str, text: str) -> Path:
        """Write a file that must not exist yet (nothing already written is lost)."""
        target = self.path / name
        with open(target, "x", encoding="utf-8") as fh:
            fh.write(text)
        return target

    def spec(self) -> JobSpec:
        return JobSpec.from_json((self.path / "spec.json").read_text())

    # ---- manifest --------------------------------------------------------------------------
    def manifest(self) -> dict[str, Any]:
        try:
            return json.loads((self.path / MANIFEST).read_text())
        except FileNotFoundError:
            raise SubmitError(
                f"{self.path} has no {MANIFEST}: it is not a run directory made by the kit; "
                "pass the folder that submit() printed"
            ) from None

    def update(self, **fields: Any) -> dict[str, Any]:
        """Merge ``fields`` into the manifest, written atomically (readers never see half)."""
        return self.amend(lambda _current: fields)

    def amend(self, decide: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
        """Merge what ``decide(current manifest)`` returns, as one step no other writer can
        interleave with (a lock file in the run directory), written atomically under a name
        of its own; returns the manifest as written.

        >>> import tempfile
        >>> run = RunDir(Path(tempfile.mkdtemp()))
        >>> run.amend(lambda m: {"tries": m.get("tries", 0) + 1})["tries"]
        1
        """
        target = self.path / MANIFEST
        with _locked(self.path / LOCK):
            try:
                data = json.loads(target.read_text())
            except FileNotFoundError:
                data = {"run_dir": str(self.path), "created_at": now_iso()}
            changes = decide(data)
            if not changes:
                return data
            data.update(changes)
            fd, tmp = tempfile.mkstemp(prefix=f".{MANIFEST}.", suffix=".tmp", dir=self.path)
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    fh.write(json.dumps(data, indent=2, sort_keys=True) + "\n")
                os.replace(tmp, target)
            except BaseException:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
                raise
        return data


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` (created if missing) for the duration."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def list_runs(runs_root: str | os.PathLike[str] | None = None) -> list[dict[str, Any]]:
    """Every run under the runs root, oldest first (by the manifest's ``created_at``), as
    manifest dicts (with ``name``)."""
    root = default_runs_root(runs_root)
    rows = []
    for path in (p for p in root.glob("*") if (p / MANIFEST).is_file()):
        try:
            data = json.loads((path / MANIFEST).read_text())
        except json.JSONDecodeError:
            data = {"state": "UNREADABLE"}
        rows.append({"name": path.name, **data})
    return sorted(rows, key=lambda row: _age(root / row["name"], row))


def _age(path: Path, data: dict[str, Any]) -> tuple[float, int, str]:
    """When a run was made (the manifest's created_at, else the folder's time), then its
    ``-k`` suffix: runs of the same second keep the order they were made in."""
    try:
        made = datetime.fromisoformat(str(data["created_at"])).timestamp()
    except (KeyError, ValueError):
        made = path.stat().st_mtime
    suffix = re.search(r"-(\d{1,3})$", path.name)
    return made, int(suffix.group(1)) if suffix else 0, path.name
