"""Print, per rank, which CPUs, NUMA node(s) and device it really got. One line per rank::

    mpiexec -n 2 -bind-to core python -m hpcprof_kit.apps.affinity_report
    affinity_report host=x1 rank=0 local_rank=0 world_size=2 cpus=0 online=0-1 numa=0 device=cpu

``cpus`` is ``os.sched_getaffinity(0)``, ``online`` every CPU of the machine (a rank with
cpus == online is unbound). ``device`` is the node device the rank drives with
``set_device(local_rank)``: the entry of ``ZE_AFFINITY_MASK``/``CUDA_VISIBLE_DEVICES`` when one
is set, else the local rank when the node has devices, else ``cpu``; ``--torch`` asks torch
instead (costs its import). Parse the job's stdout with
:func:`hpcprof_kit.affinity.report.parse_report`.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from pathlib import Path

from hpcprof_kit.affinity.cpulist import format_cpus
from hpcprof_kit.affinity.report import numa_nodes_of, online_cpus, report_line

MASK_VARS = ("ZE_AFFINITY_MASK", "CUDA_VISIBLE_DEVICES")


def _devices_on_node() -> int:
    """Torch devices a node has: the system record's count, else the GPU device files."""
    name = os.environ.get("HPCPROF_SYSTEM")
    if name:
        from hpcprof_kit.systems import load_system

        count = load_system(name).devices_per_node
        if count:
            return count
    nvidia = list(Path("/dev").glob("nvidia[0-9]*"))
    return len(nvidia) or len(list(Path("/dev/dri").glob("renderD*")))


def device_of(local_rank: int, probe_torch: bool = False) -> str:
    """The node device this rank drives, as text (``cpu`` when there is none)."""
    if probe_torch:
        import torch

        acc = torch.accelerator.current_accelerator()
        if acc is None:
            return "cpu"
        return str(local_rank % max(torch.accelerator.device_count(), 1))
    for var in MASK_VARS:
        mask = os.environ.get(var)
        if mask:
            visible = [m for m in mask.split(",") if m]
            return visible[local_rank % len(visible)] if visible else "cpu"
    count = _devices_on_node()
    return str(local_rank % count) if count else "cpu"


def _site_fields() -> dict[str, str]:
    """Under the site rehearsal, the binding the site node would give (its PALS stand-in
    exports it; this machine's own CPUs say nothing about a 208-CPU node)."""
    site = os.environ.get("HPCPROF_SITE_CPUS")
    system = os.environ.get("HPCPROF_SYSTEM")
    if not site or not system:
        return {}
    from hpcprof_kit.affinity.cpulist import parse_cpus
    from hpcprof_kit.systems import load_system

    topo = load_system(system).topology
    numa = {topo.numa_of_core(c) for c in parse_cpus(site)} - {None}
    return {
        "host": os.environ.get("HPCPROF_SITE_HOST", socket.gethostname()),
        "cpus": site,
        "online": os.environ.get("HPCPROF_SITE_ONLINE", site),
        "numa": format_cpus(sorted(numa)) if numa else "0",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="print the CPUs and device each rank got")
    parser.add_argument("--torch", action="store_true", help="ask torch for the device")
    args = parser.parse_args(argv)
    from hpcprof_kit.ranks import ranks_from_env

    info = ranks_from_env()
    cpus = sorted(os.sched_getaffinity(0))
    fields = {
        "host": socket.gethostname(),
        "rank": info.rank,
        "local_rank": info.local_rank,
        "world_size": info.world_size,
        "cpus": format_cpus(cpus),
        "online": format_cpus(online_cpus()),
        "numa": format_cpus(numa_nodes_of(cpus)),
        "device": device_of(info.local_rank, args.torch),
    }
    fields.update(_site_fields())
    # One write of a short line is atomic on a pipe, so ranks never glue their lines together.
    os.write(sys.stdout.fileno(), (report_line(fields) + "\n").encode())
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
