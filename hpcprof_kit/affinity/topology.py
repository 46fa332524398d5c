"""The node as binding sees it: sockets, NUMA domains, cores and their hyperthreads, devices.

Known systems (Aurora, Polaris) take their node from the system record; ``local`` and
``slurm`` read the machine they run on from ``/sys`` (or ``lscpu -p`` when ``/sys`` lacks it).

>>> from hpcprof_kit.affinity.topology import node_topology
>>> aurora = node_topology("aurora")
>>> len(aurora.cpus), aurora.siblings(5), aurora.socket_of(60), sorted(aurora.reserved)[:2]
(208, (5, 109), 1, [0, 52])
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from hpcprof_kit.affinity.cpulist import parse_cpus
from hpcprof_kit.errors import BindingError
from hpcprof_kit.systems import System, load_system


@dataclass(frozen=True)
class Cpu:
    """One logical CPU: its number, the physical core it belongs to, its socket and NUMA domain."""

    id: int
    core: int  # the lowest logical CPU of its physical core (names the core)
    socket: int
    numa: int


@dataclass(frozen=True)
class Device:
    """One torch device (a GPU, or a tile in Aurora's FLAT mode) and where it sits."""

    id: int
    label: str
    socket: int
    numa: int
    gpu: int


@dataclass(frozen=True)
class NodeTopology:
    """A node's CPUs, reserved CPUs and devices, with lookups by CPU number."""

    name: str
    cpus: tuple[Cpu, ...]
    reserved: frozenset[int] = frozenset()
    devices: tuple[Device, ...] = ()
    reserved_note: str = ""
    _by_id: dict[int, Cpu] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._by_id.update({c.id: c for c in self.cpus})

    def cpu(self, cpu: int) -> Cpu:
        """The CPU record; BindingError when the node has no such CPU."""
        try:
            return self._by_id[cpu]
        except KeyError:
            raise BindingError(
                f"CPU {cpu} is beyond the {self.name} node (its CPUs are "
                f"{min(self._by_id)}-{max(self._by_id)}); pick CPUs inside that range"
            ) from None

    @property
    def cpu_ids(self) -> tuple[int, ...]:
        return tuple(sorted(self._by_id))

    @property
    def sockets(self) -> tuple[int, ...]:
        return tuple(sorted({c.socket for c in self.cpus}))

    @property
    def numa_domains(self) -> tuple[int, ...]:
        return tuple(sorted({c.numa for c in self.cpus}))

    @property
    def cores(self) -> tuple[tuple[int, ...], ...]:
        """Physical cores in order, each as its logical CPUs (first thread first)."""
        groups: dict[int, list[int]] = {}
        for c in sorted(self.cpus, key=lambda c: c.id):
            groups.setdefault(c.core, []).append(c.id)
        return tuple(tuple(v) for _, v in sorted(groups.items()))

    def socket_of(self, cpu: int) -> int:
        return self.cpu(cpu).socket

    def numa_of(self, cpu: int) -> int:
        return self.cpu(cpu).numa

    def siblings(self, cpu: int) -> tuple[int, ...]:
        """All logical CPUs of ``cpu``'s physical core, itself included."""
        core = self.cpu(cpu).core
        return tuple(sorted(c.id for c in self.cpus if c.core == core))

    def cpus_of_numa(self, numa: int) -> tuple[int, ...]:
        return tuple(sorted(c.id for c in self.cpus if c.numa == numa))


def from_system(system: System) -> NodeTopology:
    """Build the node of a system whose shape is known in advance (its TOML ``topology``)."""
    t = system.topology
    cpus = []
    for phys in range(t.physical_cores):
        numa = t.numa_of_core(phys)
        socket = phys // t.cores_per_socket
        for thread in range(max(t.threads_per_core, 1)):
            cpus.append(
                Cpu(
                    phys + thread * t.sibling_offset, phys, socket, socket if numa is None else numa
                )
            )
    reserved = {
        r + k * t.sibling_offset
        for r in t.reserved_cores
        for k in range(max(t.threads_per_core, 1))
    }
    devices = tuple(
        Device(
            d.id,
            f"GPU{d.gpu}.{d.tile}" if t.tiles_per_gpu > 1 else f"GPU{d.gpu}",
            d.socket,
            d.numa,
            d.gpu,
        )
        for d in t.devices
    )
    return NodeTopology(system.name, tuple(cpus), frozenset(reserved), devices, t.reserved_note)


def read_local(sys_root: str | os.PathLike[str] = "/sys", name: str = "local") -> NodeTopology:
    """Read this machine's CPUs from ``/sys`` (else ``lscpu -p``, else ``os.cpu_count()``).

    >>> node = read_local()
    >>> len(node.cpus) >= 1
    True
    """
    root = Path(sys_root) / "devices" / "system"
    numa_of: dict[int, int] = {}
    for node_dir in sorted((root / "node").glob("node[0-9]*")):
        cpulist = (
            (node_dir / "cpulist").read_text().strip() if (node_dir / "cpulist").exists() else ""
        )
        for cpu in parse_cpus(cpulist) if cpulist else ():
            numa_of[cpu] = int(node_dir.name[4:])
    raw: list[tuple[int, int, int]] = []  # (cpu, socket, core key)
    for cpu_dir in (root / "cpu").glob("cpu[0-9]*"):
        topo = cpu_dir / "topology"
        if not (topo / "physical_package_id").exists():
            continue  # offline CPUs have no topology folder
        cpu = int(cpu_dir.name[3:])
        sibs = parse_cpus((topo / "thread_siblings_list").read_text().strip())
        raw.append((cpu, int((topo / "physical_package_id").read_text()), min(sibs)))
    if not raw:
        raw = _read_lscpu(numa_of)
    cpus = tuple(Cpu(c, core, max(sock, 0), numa_of.get(c, 0)) for c, sock, core in sorted(raw))
    return NodeTopology(name, cpus)


def _read_lscpu(numa_of: dict[int, int]) -> list[tuple[int, int, int]]:
    """Fallback for containers without ``/sys`` topology: ``lscpu -p``, else one core per CPU."""
    if shutil.which("lscpu"):
        out = subprocess.run(
            ["lscpu", "-p=CPU,CORE,SOCKET,NODE"], capture_output=True, text=True, check=False
        ).stdout
        rows = [line.split(",") for line in out.splitlines() if line and not line.startswith("#")]
        first_of_core: dict[tuple[int, int], int] = {}
        raw = []
        for cpu_s, core_s, sock_s, node_s in rows:
            cpu, sock = int(cpu_s), int(sock_s or 0)
            key = first_of_core.setdefault((sock, int(core_s or cpu)), cpu)
            numa_of.setdefault(cpu, int(node_s or 0))
            raw.append((cpu, sock, key))
        if raw:
            return raw
    return [(c, 0, c) for c in range(os.cpu_count() or 1)]


def node_topology(system: str | System) -> NodeTopology:
    """The node of ``system``: from its record when known, else read from this machine.

    >>> node_topology("polaris").numa_of(24)
    3
    """
    record = load_system(system) if isinstance(system, str) else system
    if record.topology.known:
        return from_system(record)
    return read_local(name=record.name)
