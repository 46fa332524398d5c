"""A binding plan as a value: each rank's CPUs and device, rendered for any launcher.

Plans come from :func:`hpcprof_kit.affinity.plan_for` (presets, the generator, or a list you
write); this module only holds them and writes them out.

Device selection: by default every rank sees all devices and calls
``set_device(local_rank)`` (the kit's apps do), so :meth:`BindingPlan.env` only carries
node-wide variables (``CCL_WORKER_AFFINITY``, a node-wide ``ZE_AFFINITY_MASK``, the device
hierarchy). A plan that gives each rank a *different* mask (Polaris' reversed helper) cannot be
one environment for all ranks: :attr:`BindingPlan.needs_wrapper` is then true and
:meth:`BindingPlan.rank_wrapper` writes the small per-rank script that sets it and ``exec``\\s.

>>> from hpcprof_kit.affinity import plan_for
>>> plan = plan_for("polaris", 4)
>>> plan.launcher_args("pals")
['--cpu-bind', 'list:24-31:16-23:8-15:0-7']
>>> plan.launcher_args("hydra")[1][:22]
'user:24+25+26+27+28+29'
>>> plan.findings
()
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from hpcprof_kit.affinity.checks import Finding
from hpcprof_kit.affinity.cpulist import format_cpus, hydra_user, pals_list, srun_cpu_bind
from hpcprof_kit.affinity.topology import NodeTopology
from hpcprof_kit.errors import BindingError
from hpcprof_kit.ranks import LOCAL_RANK_VARS  # the per-rank wrapper consults them in this order

LAUNCHERS = ("pals", "hydra", "srun")


@dataclass(frozen=True)
class RankBinding:
    """One local rank: its CPUs, the node device it drives (None: CPU only), how it selects it.

    ``index`` is what the rank passes to ``set_device`` (or the mask value when ``masked``).
    """

    rank: int
    cpus: tuple[int, ...]
    device: int | None = None
    index: int | None = None
    masked: bool = False

    @property
    def select(self) -> str:
        """How the rank reaches its device, in the words of the code that does it."""
        if self.index is None:
            return "cpu"
        return f"mask={self.index}, set_device(0)" if self.masked else f"set_device({self.index})"


@dataclass(frozen=True)
class BindingPlan:
    """Where each rank of one node runs. Findings travel with the plan wherever it is shown."""

    system: str
    ranks_per_node: int
    preset: str
    style: str  # "list" | "depth" | "core" | "reversed" | "none"
    ranks: tuple[RankBinding, ...]
    node: NodeTopology = field(repr=False)
    launcher: str = "hydra"
    depth: int | None = None
    ccl_workers: tuple[int, ...] = ()
    mask_var: str = "CUDA_VISIBLE_DEVICES"
    extra_env: dict[str, str] = field(default_factory=dict)
    findings: tuple[Finding, ...] = ()
    title: str = ""

    @property
    def cpus(self) -> tuple[tuple[int, ...], ...]:
        """Per-rank CPU lists, local rank order."""
        return tuple(r.cpus for r in self.ranks)

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "error")

    @property
    def needs_wrapper(self) -> bool:
        """True when each rank needs its own device mask (see :meth:`rank_wrapper`)."""
        return any(r.masked for r in self.ranks)

    @property
    def cpu_bind(self) -> str:
        """The binding as this system's launcher spells it (one string, as in a job script)."""
        return " ".join(self.launcher_args())

    def launcher_args(self, launcher: str | None = None) -> list[str]:
        """The launcher's binding flags: ``pals`` (Cray PALS), ``hydra`` (MPICH) or ``srun``.

        >>> from hpcprof_kit.affinity import plan_for
        >>> plan_for("aurora", 12, "depth-8").launcher_args("pals")
        ['--depth=8', '--cpu-bind', 'depth']
        >>> plan_for("local", 2, "core").launcher_args("hydra")
        ['-bind-to', 'core']
        """
        which = launcher or self.launcher
        if which not in LAUNCHERS:
            raise BindingError(
                f"launcher {which!r} is not one the kit writes bindings for; "
                f"use one of {', '.join(LAUNCHERS)}"
            )
        if self.style == "none":
            return {"pals": ["--cpu-bind", "none"], "hydra": ["-bind-to", "none"]}.get(
                which, ["--cpu-bind=none"]
            )
        if self.style == "core":
            return {"pals": ["--cpu-bind", "core"], "hydra": ["-bind-to", "core"]}.get(
                which, ["--cpu-bind=cores"]
            )
        if self.style == "depth" and which == "pals":
            return [f"--depth={self.depth}", "--cpu-bind", "depth"]
        if which == "pals":
            return ["--cpu-bind", pals_list(self.cpus)]
        if which == "hydra":
            return ["-bind-to", hydra_user(self.cpus)]
        return [f"--cpu-bind={srun_cpu_bind(self.cpus)}"]

    def env(self) -> dict[str, str]:
        """Node-wide variables for the job script (same for every rank).

        >>> from hpcprof_kit.affinity import plan_for
        >>> plan_for("aurora", 2).env()
        {'ZE_AFFINITY_MASK': '0,1', 'CCL_WORKER_AFFINITY': '42,43'}
        """
        out = dict(self.extra_env)
        if self.ccl_workers:
            out["CCL_WORKER_AFFINITY"] = ",".join(str(c) for c in self.ccl_workers)
        return out

    def rank_wrapper(self) -> str:
        """A bash wrapper that gives each local rank its own device mask, then ``exec``\\s.

        Only for plans with :attr:`needs_wrapper`; launch as ``bash wrapper.sh python ...``.
        """
        if not self.needs_wrapper:
            raise BindingError(
                f"plan {self.preset!r} selects devices with set_device(local_rank); it needs "
                "no per-rank wrapper: launch the command directly"
            )
        lookup = "0"
        for var in reversed(LOCAL_RANK_VARS):
            lookup = f"${{{var}:-{lookup}}}"
        masks = " ".join(str(r.index) for r in self.ranks)
        return (
            "#!/bin/bash\n"
            f"# Per-rank device mask of binding plan '{self.preset}' on {self.system}.\n"
            f"local_rank={lookup}\n"
            f"masks=({masks})\n"
            f'export {self.mask_var}="${{masks[$local_rank % {len(self.ranks)}]}}"\n'
            'exec "$@"\n'
        )

    def to_json(self) -> dict[str, Any]:
        """The plan as JSON-ready data (``json.dumps`` it to store or print).

        >>> from hpcprof_kit.affinity import plan_for
        >>> plan_for("local", 1, "user:0").to_json()["ranks"]
        [{'rank': 0, 'cpus': [0], 'device': None, 'select': 'cpu'}]
        """
        return {
            "system": self.system,
            "ranks_per_node": self.ranks_per_node,
            "preset": self.preset,
            "cpu_bind": self.cpu_bind,
            "env": self.env(),
            "ranks": [
                {"rank": r.rank, "cpus": list(r.cpus), "device": r.index, "select": r.select}
                for r in self.ranks
            ],
            "findings": [f.to_dict() for f in self.findings],
        }

    to_dict = to_json

    def dumps(self) -> str:
        """The plan as indented JSON text."""
        return json.dumps(self.to_json(), indent=2)

    def table(self):
        """One row per rank: CPUs, sockets, NUMA domains, device, CCL worker, finding kinds.

        >>> from hpcprof_kit.affinity import plan_for
        >>> plan_for("polaris", 4, "common-mistake").table().loc[0, "problems"]
        'numa'
        """
        import pandas as pd

        rows = []
        labels = {d.id: d.label for d in self.node.devices}
        for i, r in enumerate(self.ranks):
            kinds = sorted({f.kind for f in self.findings if f.rank == r.rank})
            rows.append(
                {
                    "rank": r.rank,
                    "cpus": format_cpus(r.cpus),
                    "n_cpus": len(r.cpus),
                    "socket": format_cpus({self.node.socket_of(c) for c in r.cpus}),
                    "numa": format_cpus({self.node.numa_of(c) for c in r.cpus}),
                    "device": labels.get(r.device, "cpu") if r.device is not None else "cpu",
                    "select": r.select,
                    "ccl_worker": self.ccl_workers[i] if i < len(self.ccl_workers) else "",
                    "problems": ",".join(kinds),
                }
            )
        return pd.DataFrame(rows)

    def __str__(self) -> str:
        head = f"{self.system} '{self.preset}', {self.ranks_per_node} ranks/node: {self.cpu_bind}"
        lines = [head] + [f"  [{f.severity}] {f.kind}: {f.message}" for f in self.findings]
        return "\n".join(lines)
