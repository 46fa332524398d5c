"""Which events are communication: a list of (library, regular expression) pairs, as data.

Device kernels and host spans whose name matches a pattern go on the ``comm`` track. Extend
the list for a library the kit does not know, either for one call or for the whole session:

>>> classify_comm("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)")
'nccl'
>>> classify_comm("my_exchange_kernel", [("mylib", r"^my_exchange")])
'mylib'
>>> COMM_PATTERNS.append(("mylib", r"^my_exchange"))   # every later load sees it
>>> classify_comm("my_exchange_kernel")
'mylib'
>>> _ = COMM_PATTERNS.pop()
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

# (library, pattern searched in the event name); first match wins. Order: device kernels first.
COMM_PATTERNS: list[tuple[str, str]] = [
    ("nccl", r"^ncclKernel_"),
    ("nccl", r"^ncclDevKernel_"),
    ("nccl", r"^nccl:"),  # host spans of the NCCL process group (nccl:all_reduce)
    ("rccl", r"^(rccl|RCCL)"),
    ("oneccl", r"(?i)^(oneccl|ccl)[_:]"),  # oneCCL kernels and ITT tasks (ccl_allreduce...)
    ("oneccl", r"(?i)^(allreduce|allgatherv?|reduce_scatter|alltoallv?|broadcast)_\w*kernel"),
    ("xccl", r"^xccl:"),  # host spans of the XCCL process group
    ("gloo", r"^gloo:"),
    ("c10d", r"^c10d::"),  # c10d::allreduce_ and friends (host side of every backend)
    ("c10d", r"^record_param_comms$"),
    ("mpi", r"^MPI_"),  # unitrace --chrome-mpi-logging
]

PatternList = Sequence[tuple[str, str] | str]


def _compiled(patterns: PatternList | None) -> list[tuple[str, re.Pattern]]:
    chosen = COMM_PATTERNS if patterns is None else patterns
    out = []
    for item in chosen:
        label, regex = ("custom", item) if isinstance(item, str) else item
        out.append((label, re.compile(regex)))
    return out


def classify_comm(name: str, patterns: PatternList | None = None) -> str | None:
    """The communication library an event name belongs to, or None for other work.

    ``patterns`` replaces :data:`COMM_PATTERNS` for this call; a bare string counts as
    library ``"custom"``.

    >>> classify_comm("gloo:all_reduce"), classify_comm("aten::mm")
    ('gloo', None)
    """
    for label, regex in _compiled(patterns):
        if regex.search(name):
            return label
    return None


def comm_labels(names: Iterable[str], patterns: PatternList | None = None) -> list[str | None]:
    """:func:`classify_comm` over many names, compiling the patterns once.

    >>> comm_labels(["ncclKernel_AllReduce", "aten::add"])
    ['nccl', None]
    """
    compiled = _compiled(patterns)
    out: list[str | None] = []
    for name in names:
        out.append(next((label for label, rx in compiled if rx.search(str(name))), None))
    return out
