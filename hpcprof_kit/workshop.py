"""The workshop file: the one place an instructor sets a class's system, project, reservation,
filesystems, environment and proxy; notebooks, ``JobSpec.for_workshop`` and ``preflight`` pick
it up (``JobSpec(...)`` alone never reads it: a spec is the same value in any folder).

Found through ``$HPCPROF_WORKSHOP`` (a path; ``off`` ignores any file), else as
``workshop.toml`` in the current folder or one of its two parents (notebooks run in
``notebooks/``, so a file at the repository root is found). Without a file everything keeps the
laptop defaults. ``hpcprof-kit workshop init`` writes one.

>>> ws = Workshop(system="aurora", project="MYPROJ", queue="R123456", reservation_nodes=8)
>>> ws.spec_defaults("aurora")["account"], ws.spec_defaults("polaris")
('MYPROJ', {})
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from hpcprof_kit.errors import SpecError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

WORKSHOP_VAR = "HPCPROF_WORKSHOP"
FILE_NAME = "workshop.toml"
PROXY_KEYS = ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "no_proxy")
ALCF_PROXY = "http://proxy.alcf.anl.gov:3128"  # docs: aurora/getting-started-on-aurora.md, Proxy
_WORD = re.compile(r"^[A-Za-z0-9_.-]+\Z")
_loaded: dict[Path, tuple[tuple[int, int], Workshop]] = {}  # file -> (version, its workshop)


@dataclass(frozen=True)
class Workshop:
    """A class's settings. ``source`` is the file they came from ('' for none)."""

    system: str = "local"
    project: str | None = None
    queue: str | None = None
    reservation_nodes: int | None = None
    reservation_walltime: str | None = None
    filesystems: str | None = None
    venv: str | None = None
    ranks_per_node: int | None = None
    proxy: dict[str, str] = field(default_factory=dict)
    pack: str | None = None  # the instructor's reference pack (hpcprof_kit.pack)
    source: str = ""

    def spec_defaults(self, system: str) -> dict[str, Any]:
        """The JobSpec fields this workshop fills for a job on ``system`` (none elsewhere)."""
        if system != self.system or not self.source and self.system == "local":
            return {}
        chosen = {"account": self.project, "queue": self.queue,
                  "filesystems": self.filesystems, "venv": self.venv}  # fmt: skip
        out: dict[str, Any] = {k: v for k, v in chosen.items() if v is not None}
        if self.proxy:
            out["env"] = dict(self.proxy)
        return out

    def reservations(self) -> dict[str, dict[str, Any]]:
        """The reservation queue with its limits, as the rehearsal's twin takes them."""
        if not self.queue or self.reservation_nodes is None:
            return {}
        return {self.queue: {"nodes": self.reservation_nodes,
                             "walltime": self.reservation_walltime or "01:00:00"}}  # fmt: skip

    def spec_fields(self, **fields: Any) -> dict[str, Any]:
        """The JobSpec fields ``JobSpec.for_workshop(**fields)`` builds: the left-out ones (or
        those given as None) take this workshop's values for its system; ``system`` defaults
        to the workshop's. A job in the reservation queue carries the reservation's limits
        (``JobSpec.reservation``).

        >>> ws = Workshop(system="aurora", project="MYPROJ", queue="R123456", reservation_nodes=8)
        >>> chosen = ws.spec_fields(nodes=2)
        >>> chosen["system"], chosen["account"], chosen["queue"], chosen["reservation"]
        ('aurora', 'MYPROJ', 'R123456', {'nodes': 8})
        >>> "account" in ws.spec_fields(system="polaris")   # the workshop's system only
        False
        """
        given = {key: value for key, value in fields.items() if value is not None}
        system = given.setdefault("system", self.system)
        for key, value in self.spec_defaults(system).items():
            if key == "env":
                given["env"] = {**value, **(given.get("env") or {})}
            else:
                given.setdefault(key, value)
        if system == self.system and self.queue and given.get("queue") == self.queue:
            limits = {"nodes": self.reservation_nodes, "walltime": self.reservation_walltime}
            if self.reservation_nodes is not None:
                given.setdefault("reservation", {k: v for k, v in limits.items() if v})
        return given

    def validate(self) -> Workshop:
        from hpcprof_kit.systems import load_system

        where = f" in {self.source}" if self.source else ""
        load_system(self.system)
        for key in ("project", "queue"):
            value = getattr(self, key)
            if value is not None and not _WORD.match(value):
                raise SpecError(f"{key} {value!r}{where} has characters a scheduler refuses; "
                                "use letters, digits, '.', '_' or '-'")  # fmt: skip
        if self.reservation_walltime is not None:
            from hpcprof_kit.jobs.queues import walltime_seconds  # the one HH:MM:SS rule

            try:
                walltime_seconds(str(self.reservation_walltime))
            except SpecError:
                raise SpecError(f"reservation_walltime {self.reservation_walltime!r}{where} is "
                                "not HH:MM:SS; write e.g. '03:00:00'") from None  # fmt: skip
        for key in ("reservation_nodes", "ranks_per_node"):
            value = getattr(self, key)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                      or value < 1):  # fmt: skip
                raise SpecError(f"{key} {value!r}{where} must be a whole number of at least 1")
        unknown = sorted(set(self.proxy) - set(PROXY_KEYS))
        if unknown:
            raise SpecError(f"proxy keys {unknown}{where} are not proxy variables; use "
                            f"{', '.join(PROXY_KEYS)}")  # fmt: skip
        return self


def find_file(start: str | os.PathLike[str] | None = None) -> Path | None:
    """The workshop file in effect, or None."""
    explicit = os.environ.get(WORKSHOP_VAR)
    if explicit == "off":
        return None
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise SpecError(f"{WORKSHOP_VAR}={explicit} names no file; write one with "
                            "'hpcprof-kit workshop init', or unset the variable")  # fmt: skip
        return path
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *list(here.parents)[:2]):
        if (folder / FILE_NAME).is_file():
            return folder / FILE_NAME
    return None


def load(path: str | os.PathLike[str] | None = None) -> Workshop:
    """The workshop in effect (``Workshop()``, the laptop defaults, when there is no file)."""
    found = Path(path) if path is not None else find_file()
    if found is None:
        return Workshop()
    try:
        data = tomllib.loads(found.read_text()).get("workshop", {})
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise SpecError(f"workshop file {found} cannot be read ({exc}); fix it or write a new "
                        "one with 'hpcprof-kit workshop init'") from None  # fmt: skip
    known = {f.name for f in fields(Workshop)} - {"source"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise SpecError(f"workshop file {found} has unknown keys {unknown}; known: {sorted(known)}")
    return Workshop(**data, source=str(found)).validate()


def current() -> Workshop:
    """The workshop in effect now. Every JobSpec asks, so a file is parsed once per version
    (its modification time and size): an instructor's fresh edit is still seen at once."""
    found = find_file()
    if found is None:
        return Workshop()
    info = found.stat()
    version = (info.st_mtime_ns, info.st_size)
    cached = _loaded.get(found)
    if cached is None or cached[0] != version:
        cached = _loaded[found] = (version, load(found))
    return cached[1]


def _toml_value(value: Any) -> str:
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(value)


def dumps(ws: Workshop) -> str:
    """The workshop file's text."""
    lines = ["# The workshop's settings, read by the notebooks, JobSpec and preflight.",
             "# Written by 'hpcprof-kit workshop init'; edit freely.", "[workshop]"]  # fmt: skip
    for key, value in asdict(ws).items():
        if key in ("source", "proxy") or value is None:
            continue
        lines.append(f"{key} = {_toml_value(value)}")
    if ws.proxy:
        lines.append("[workshop.proxy]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in ws.proxy.items()]
    return "\n".join(lines) + "\n"


def init(path: str | os.PathLike[str], ws: Workshop, force: bool = False) -> Path:
    """Write ``ws`` to ``path``; an existing file is kept unless ``force``."""
    target = Path(path)
    ws.validate()
    if target.exists() and not force:
        raise SpecError(f"{target} exists; edit it, or pass --force to replace it")
    target.write_text(dumps(ws))
    return target


def alcf_proxy() -> dict[str, str]:
    """ALCF's proxy for compute nodes (they reach the internet only through it)."""
    return {"http_proxy": ALCF_PROXY, "https_proxy": ALCF_PROXY}
