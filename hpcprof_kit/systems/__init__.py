"""System records: the facts of each site as data files (one TOML file per system).

>>> from hpcprof_kit.systems import load_system
>>> aurora = load_system("aurora")
>>> aurora.scheduler, aurora.launcher, aurora.devices_per_node
('pbs', 'pals', 12)
>>> aurora.queue("debug").max_walltime
'01:00:00'

A new site is a new ``<name>.toml`` beside these (or in ``$HPCPROF_SYSTEMS_DIR``) plus a test.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from hpcprof_kit.errors import SpecError, SystemError_

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

_HERE = Path(__file__).resolve().parent
_SYSTEM_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")  # a file name in the systems folder, no path


@dataclass(frozen=True)
class Queue:
    name: str
    min_nodes: int
    max_nodes: int
    max_walltime: str  # HH:MM:SS


@dataclass(frozen=True)
class NumaDomain:
    id: int
    socket: int
    kind: str
    cores: tuple[int, ...]  # physical core numbers (logical CPUs of the first hardware thread)


@dataclass(frozen=True)
class DeviceSlot:
    id: int  # torch device index in the system's default hierarchy
    gpu: int
    tile: int
    socket: int
    numa: int


@dataclass(frozen=True)
class Topology:
    sockets: int
    cores_per_socket: int
    threads_per_core: int
    sibling_offset: int
    reserved_cores: tuple[int, ...]
    reserved_note: str
    gpus: int
    tiles_per_gpu: int
    device_hierarchy: str
    device_mask_var: str
    memory_per_device_gib: int
    numa: tuple[NumaDomain, ...]
    devices: tuple[DeviceSlot, ...]

    @property
    def known(self) -> bool:
        """False for systems whose node shape is read at run time (local, generic Slurm)."""
        return self.sockets > 0

    @property
    def physical_cores(self) -> int:
        return self.sockets * self.cores_per_socket

    @property
    def logical_cpus(self) -> int:
        return self.physical_cores * max(self.threads_per_core, 1)

    def socket_of_core(self, core: int) -> int:
        """Socket of a logical CPU (hyperthread siblings map to their core's socket)."""
        if self.cores_per_socket <= 0:
            raise SpecError("topology: this system's node shape is not known in advance")
        return (core % self.physical_cores) // self.cores_per_socket

    def numa_of_core(self, core: int) -> int | None:
        phys = core % self.physical_cores if self.physical_cores else core
        for dom in self.numa:
            if phys in dom.cores:
                return dom.id
        return None


@dataclass(frozen=True)
class System:
    """One site's facts. Fields mirror the TOML file; see ``hpcprof_kit/systems/*.toml``."""

    name: str
    title: str
    scheduler: str  # "pbs" | "slurm" | "none"
    launcher: str  # "pals" | "hydra" | "srun"
    device_type: str  # "xpu" | "cuda" | "auto"
    backend: str  # "xccl" | "nccl" | "gloo" | "auto"
    profiler_activity: str
    hsn_suffix: str
    account_required: bool
    default_queue: str
    default_filesystems: str
    default_binding: str
    vendor_tracers: tuple[str, ...]
    topology: Topology
    queues: dict[str, Queue]
    setup_lines: tuple[str, ...]
    env_vars: dict[str, str]
    extra: dict[str, Any] = field(default_factory=dict)
    source: str = ""
    # The folder of a record found through $HPCPROF_SYSTEMS_DIR ("" for the kit's own): a batch
    # job inherits none of the submitting shell's variables, so its script names the folder.
    folder: str = ""

    @property
    def devices_per_node(self) -> int:
        """Torch devices per node in the default hierarchy (Aurora FLAT: 12 tiles)."""
        return len(self.topology.devices)

    def queue(self, name: str | None = None) -> Queue:
        """The named queue (or the default); SpecError lists the known ones.

        Pure: only the record is read. Queues it does not list (workshop reservations, queues
        only the scheduler knows) are resolved by ``hpcprof_kit.jobs.queues.resolve_queue``.
        """
        key = self.default_queue if name is None else name
        if key not in self.queues:
            known = ", ".join(repr(q) for q in self.queues) or "none"
            hint = RESERVATION_HINTS.get(self.scheduler, "")
            raise SpecError(
                f"queue {key!r} is not a queue of {self.name} (known: {known}); "
                f"pick one of them or add it to {self.source or self.name + '.toml'}{hint}"
            )
        return self.queues[key]


# How a user reaches a reservation on each scheduler, appended to the unknown-queue error.
RESERVATION_HINTS: dict[str, str] = {
    "pbs": (
        "; for a workshop reservation pass its queue name as pbs_rstat shows it "
        "(R<digits>, e.g. R123456), or run where qstat can confirm the queue"
    ),
}


def _parse_cores(text: str) -> tuple[int, ...]:
    out: list[int] = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return tuple(out)


def _from_dict(d: dict[str, Any], source: str) -> System:
    try:
        topo = d["topology"]
        topology = Topology(
            sockets=int(topo["sockets"]),
            cores_per_socket=int(topo["cores_per_socket"]),
            threads_per_core=int(topo["threads_per_core"]),
            sibling_offset=int(topo["sibling_offset"]),
            reserved_cores=tuple(topo.get("reserved_cores", [])),
            reserved_note=topo.get("reserved_note", ""),
            gpus=int(topo["gpus"]),
            tiles_per_gpu=int(topo.get("tiles_per_gpu", 1)),
            device_hierarchy=topo.get("device_hierarchy", ""),
            device_mask_var=topo.get("device_mask_var", "CUDA_VISIBLE_DEVICES"),
            memory_per_device_gib=int(topo.get("memory_per_device_gib", 0)),
            numa=tuple(
                NumaDomain(n["id"], n["socket"], n["kind"], _parse_cores(n["cores"]))
                for n in topo.get("numa", [])
            ),
            devices=tuple(DeviceSlot(**dev) for dev in topo.get("devices", [])),
        )
        queues = {
            name: Queue(name, int(q["min_nodes"]), int(q["max_nodes"]), q["max_walltime"])
            for name, q in d.get("queues", {}).items()
        }
        known = {
            "name", "title", "scheduler", "launcher", "device_type", "backend",
            "profiler_activity", "hsn_suffix", "account_required", "default_queue",
            "default_filesystems", "default_binding", "vendor_tracers", "topology",
            "queues", "environment",
        }  # fmt: skip
        env = d.get("environment", {})
        return System(
            name=d["name"],
            title=d.get("title", d["name"]),
            scheduler=d["scheduler"],
            launcher=d["launcher"],
            device_type=d.get("device_type", "auto"),
            backend=d.get("backend", "auto"),
            profiler_activity=d.get("profiler_activity", "auto"),
            hsn_suffix=d.get("hsn_suffix", ""),
            account_required=bool(d.get("account_required", False)),
            default_queue=d.get("default_queue", ""),
            default_filesystems=d.get("default_filesystems", ""),
            default_binding=d.get("default_binding", "none"),
            vendor_tracers=tuple(d.get("vendor_tracers", [])),
            topology=topology,
            queues=queues,
            setup_lines=tuple(env.get("setup", [])),
            env_vars=dict(env.get("vars", {})),
            extra={
                **{k: v for k, v in d.items() if k not in known},
                "prepend": dict(env.get("prepend", {})),
            },  # fmt: skip
            source=source,
        )
    except KeyError as exc:
        raise SystemError_(
            f"system record {source} lacks the field {exc.args[0]!r}; "
            "copy hpcprof_kit/systems/local.toml as a template"
        ) from None


def _search_dirs() -> list[Path]:
    extra = os.environ.get("HPCPROF_SYSTEMS_DIR")
    return ([Path(extra)] if extra else []) + [_HERE]


def system_names() -> list[str]:
    """Names of every system record found (built-in and ``$HPCPROF_SYSTEMS_DIR``)."""
    names = {p.stem for d in _search_dirs() if d.is_dir() for p in d.glob("*.toml")}
    return sorted(names)


@lru_cache(maxsize=64)
def _read_record(path: str, mtime_ns: int, size: int) -> System:
    """One record file parsed once per version of it (a changed file is read again)."""
    with open(path, "rb") as fh:
        data = tomllib.load(fh)
    record = _from_dict(data, source=Path(path).name)
    where = Path(path).resolve().parent
    return record if where == _HERE else replace(record, folder=str(where))


def load_system(name: str) -> System:
    """Load a system record by name; SystemError_ names the known systems."""
    if not isinstance(name, str) or not _SYSTEM_NAME.match(name):
        raise SystemError_(
            f"system {name!r} is not a record name (letters, digits, '.', '_' or '-'; known: "
            f"{', '.join(system_names())}); pass one of these"
        )
    for d in _search_dirs():
        path = d / f"{name}.toml"
        if path.is_file():
            stat = path.stat()
            return _read_record(str(path), stat.st_mtime_ns, stat.st_size)
    raise SystemError_(
        f"system {name!r} is unknown (known: {', '.join(system_names())}); "
        "pass one of these, or add a record to $HPCPROF_SYSTEMS_DIR"
    )


def detect_system() -> str:
    """Best guess of the system this process runs on: override, scheduler env, else 'local'.

    Order: ``$HPCPROF_SYSTEM``; inside a PBS job, the record whose name matches the PBS server
    host; inside a Slurm job, 'slurm'; otherwise 'local'. Never used inside app code to branch.
    """
    explicit = os.environ.get("HPCPROF_SYSTEM")
    if explicit:
        return explicit
    server = os.environ.get("PBS_SERVER", "") or os.environ.get("PBS_O_HOST", "")
    for name in system_names():
        if name not in ("local", "slurm") and name in server:
            return name
    if os.environ.get("SLURM_JOB_ID"):
        return "slurm"
    return "local"


@dataclass(frozen=True)
class SiteTorch:
    """A torch stack a site gives the kit (the record's ``[[site_torch]]``): where it comes from."""

    source: str  # the module or environment
    torch: str  # the release, "2.8"
    python: str = ""  # "" where the record does not say


_RELEASE = re.compile(r"^(\d+)\.(\d+)(\.\d+)?([.+a-z].*)?$")


def release(text: str) -> tuple[int, int] | None:
    """(major, minor) of a torch or Python version string, None when it is not one.

    >>> release("2.8.0.dev20250527+xpu"), release("3.10"), release("two.eight")
    ((2, 8), (3, 10), None)
    """
    found = _RELEASE.match(str(text).strip())
    return (int(found[1]), int(found[2])) if found else None


def _release(text: str, where: str) -> tuple[int, int]:
    found = release(text)
    if found is None:
        raise SystemError_(f"{where}: {text!r} is not a release like '2.8'; fix the record")
    return found


def oldest_supported(name: str | None = None) -> SiteTorch:
    """The oldest torch and Python the kit supports on system ``name`` (None: on any system).

    A record without ``[[site_torch]]`` (a generic Slurm cluster) gets the kit's oldest; a stack
    whose Python the record does not name gets the oldest Python any record names.

    >>> oldest_supported("polaris")
    SiteTorch(source='conda/2025-09-25', torch='2.8', python='3.10')
    >>> oldest_supported().torch, oldest_supported().python
    ('2.8', '3.10')
    """
    if name is not None:
        load_system(name)  # an unknown name is an error, not "any system"
    every = [
        (n, SiteTorch(**entry))
        for n in system_names()
        for entry in load_system(n).extra.get("site_torch", [])
    ]
    if not every:
        raise SystemError_("no system record has [[site_torch]]; restore the built-in records")
    pythons = [s.python for _, s in every if s.python]
    python = min(pythons, key=lambda v: _release(v, "site_torch.python"))
    stacks = [s for n, s in every if n == name] or [s for _, s in every]
    oldest = min(stacks, key=lambda s: _release(s.torch, f"{s.source}: site_torch.torch"))
    if oldest.python:
        return oldest
    return SiteTorch(oldest.source, oldest.torch, python)


__all__ = [
    "DeviceSlot", "NumaDomain", "Queue", "SiteTorch", "System", "Topology",
    "detect_system", "load_system", "oldest_supported", "release", "system_names",
]  # fmt: skip
