"""Checks of a binding against the node, each finding with its reason.

Kinds (short words a learner can grep for):

| kind | severity | what is wrong |
|---|---|---|
| ``reserved`` | error | a rank runs on a core the system keeps for its own services |
| ``shared`` | error | two ranks run on the same logical CPU |
| ``ccl`` | error | a CCL worker core is also a rank's core (or reserved) |
| ``split`` | error | one rank's cores lie on two sockets |
| ``socket`` | error | a rank's cores are on another socket than its device |
| ``numa`` | error | a rank's cores are in another NUMA domain than its device |
| ``sibling`` | warning | the two hyperthreads of one core are given to different ranks |
| ``workers`` | warning | a rank has fewer CPUs than the DataLoader workers it starts |
| ``unbound`` | info | the ranks are not bound at all: the OS may move them anywhere |

A plan with findings can still be used on purpose; it carries them wherever it is shown.

>>> from hpcprof_kit.affinity.topology import node_topology
>>> from hpcprof_kit.affinity.plan import RankBinding
>>> node = node_topology("aurora")
>>> [f.kind for f in check_ranks(node, [RankBinding(0, (0, 1, 2, 3), 0)])]
['reserved']
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Protocol

from hpcprof_kit.affinity.cpulist import format_cpus
from hpcprof_kit.affinity.topology import NodeTopology

SEVERITY = {
    "reserved": "error",
    "shared": "error",
    "ccl": "error",
    "split": "error",
    "socket": "error",
    "numa": "error",
    "sibling": "warning",
    "workers": "warning",
    "unbound": "info",
}


@dataclass(frozen=True)
class Finding:
    """One problem of a binding: which rank, what kind, how bad, and why it matters."""

    rank: int
    kind: str
    severity: str
    message: str

    def to_dict(self) -> dict:
        return asdict(self)


class _Rank(Protocol):
    rank: int
    cpus: tuple[int, ...]
    device: int | None


def _finding(rank: int, kind: str, message: str) -> Finding:
    return Finding(rank, kind, SEVERITY[kind], message)


def check_ranks(
    node: NodeTopology,
    ranks: Sequence[_Rank],
    *,
    ccl_workers: Sequence[int] = (),
    dataloader_workers: int = 0,
) -> list[Finding]:
    """Every finding for these ranks on this node, in rank order."""
    found: list[Finding] = []
    owner: dict[int, int] = {}
    for r in ranks:
        found += _reserved(node, r) + _placement(node, r)
        for cpu in r.cpus:
            if cpu in owner and owner[cpu] != r.rank:
                found.append(
                    _finding(
                        r.rank,
                        "shared",
                        f"rank {r.rank} shares CPU {cpu} with rank {owner[cpu]}: the two "
                        "processes take turns on it; give each rank its own cores",
                    )
                )
            owner.setdefault(cpu, r.rank)
        if dataloader_workers and len(r.cpus) < dataloader_workers:
            found.append(
                _finding(
                    r.rank,
                    "workers",
                    f"rank {r.rank} has {len(r.cpus)} CPUs for {dataloader_workers} DataLoader "
                    "workers: they will queue for CPU time; give each rank at least as many "
                    "CPUs as workers, or lower num_workers",
                )
            )
    found += _siblings(node, ranks, owner)
    found += _ccl(node, ranks, ccl_workers, owner)
    return sorted(found, key=lambda f: (f.rank, list(SEVERITY).index(f.kind)))


def _reserved(node: NodeTopology, r: _Rank) -> list[Finding]:
    bad = [c for c in r.cpus if c in node.reserved]
    if not bad:
        return []
    return [
        _finding(
            r.rank,
            "reserved",
            f"rank {r.rank} uses reserved CPU(s) {format_cpus(bad)}: "
            f"{node.reserved_note or 'the system keeps them for its services'}; "
            "start the rank's list after them",
        )
    ]


def _placement(node: NodeTopology, r: _Rank) -> list[Finding]:
    """Socket and NUMA agreement between a rank's cores and its device."""
    sockets = sorted({node.socket_of(c) for c in r.cpus})
    if len(sockets) > 1:
        return [
            _finding(
                r.rank,
                "split",
                f"rank {r.rank} spans sockets {sockets} (CPUs {format_cpus(r.cpus)}): half its "
                "memory traffic crosses the socket link; keep a rank on one socket",
            )
        ]
    if r.device is None or not node.devices:
        return []
    dev = next((d for d in node.devices if d.id == r.device), None)
    if dev is None:
        return []
    if sockets[0] != dev.socket:
        return [
            _finding(
                r.rank,
                "socket",
                f"rank {r.rank} runs on socket {sockets[0]} but drives {dev.label} on socket "
                f"{dev.socket}: every host-device copy crosses sockets; bind it to socket "
                f"{dev.socket} cores",
            )
        ]
    domains = sorted({node.numa_of(c) for c in r.cpus})
    if domains != [dev.numa]:
        near = format_cpus(node.cpus_of_numa(dev.numa))
        return [
            _finding(
                r.rank,
                "numa",
                f"rank {r.rank} runs in NUMA domain(s) {domains} but drives {dev.label}, which "
                f"sits next to NUMA {dev.numa}: its copies take the long way; bind it to "
                f"CPUs in {near}",
            )
        ]
    return []


def _siblings(node: NodeTopology, ranks: Sequence[_Rank], owner: dict[int, int]) -> list[Finding]:
    found = []
    for r in ranks:
        others = {
            owner[s]
            for c in r.cpus
            for s in node.siblings(c)
            if s in owner and owner[s] != r.rank and s not in r.cpus
        }
        for other in sorted(o for o in others if o > r.rank):
            found.append(
                _finding(
                    r.rank,
                    "sibling",
                    f"ranks {r.rank} and {other} hold the two hyperthreads of one core: they "
                    "compete for its execution units; give whole cores to one rank",
                )
            )
    return found


def _ccl(
    node: NodeTopology, ranks: Sequence[_Rank], workers: Iterable[int], owner: dict[int, int]
) -> list[Finding]:
    found = []
    for i, cpu in enumerate(workers):
        rank = ranks[i].rank if i < len(ranks) else i
        node.cpu(cpu)  # a worker core beyond the node is a BindingError
        if cpu in owner or cpu in node.reserved:
            whose = f"rank {owner[cpu]}'s cores" if cpu in owner else "a reserved core"
            found.append(
                _finding(
                    rank,
                    "ccl",
                    f"CCL worker core {cpu} of rank {rank} is also {whose}: the progress "
                    "thread and the training loop fight for it; put CCL workers on free cores",
                )
            )
    return found
