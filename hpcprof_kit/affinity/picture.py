"""The node drawn: sockets -> NUMA domains -> cores (both hyperthreads), devices beside their
socket, each rank's cores and device in one colour, problems marked.

Marks: reserved CPUs grey and hatched; a CPU held by two ranks (or by a rank and a CCL worker)
red; CCL worker cores carry a black "C"; a rank with findings gets a red device box. The
figure comes with the plan's table, so every colour has a number behind it.

>>> from hpcprof_kit.affinity import plan_for
>>> fig, table = draw_plan(plan_for("polaris", 4))
>>> len(table), fig.axes[0].get_title().startswith("polaris")
(4, True)
"""

from __future__ import annotations

import math
from collections import defaultdict

from hpcprof_kit.affinity.plan import BindingPlan

_MAX_COLS = 13  # cores per row inside a NUMA domain (Aurora: 52 cores -> 4 rows)
_RESERVED = "#b0b0b0"
_CLASH = "#d62728"
_FREE = "#f4f4f4"
_UNBOUND = "#c6dbef"


def _rank_colour(rank: int):
    import matplotlib

    # tab20 without its reds, so a rank is never mistaken for a collision.
    palette = [c for i, c in enumerate(matplotlib.colormaps["tab20"].colors) if i not in (6, 7)]
    return palette[rank % len(palette)]


def draw_plan(plan: BindingPlan, ax=None, *, title: str | None = None):
    """Draw ``plan`` on its node; returns ``(figure, plan.table())``.

    Save it with ``fig.savefig("plan.png")``; in a notebook the figure shows itself.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    node = plan.node
    owners: dict[int, list[int]] = defaultdict(list)
    if plan.style != "none":
        for r in plan.ranks:
            for c in r.cpus:
                owners[c].append(r.rank)
    ccl = set(plan.ccl_workers)
    bad_ranks = {f.rank for f in plan.findings if f.severity == "error"}

    def cpu_colour(cpu: int):
        held = owners.get(cpu, [])
        if len(held) > 1 or (held and cpu in ccl):
            return _CLASH, None
        if cpu in node.reserved:
            return (_CLASH if held else _RESERVED), "///"
        if plan.style == "none":
            return _UNBOUND, None
        return (_rank_colour(held[0]) if held else _FREE), None

    # Geometry: one band per socket; NUMA domains side by side; a core is a 1x1 cell, its
    # hyperthreads stacked inside it; devices in a column right of their socket.
    layout = []
    y = 0.0
    width = 0.0
    for socket in reversed(node.sockets):
        domains = [
            d
            for d in node.numa_domains
            if any(c.numa == d and c.socket == socket for c in node.cpus)
        ]
        x, tallest = 0.0, 0
        for d in domains:
            cores = [
                core
                for core in node.cores
                if node.numa_of(core[0]) == d and node.socket_of(core[0]) == socket
            ]
            cols = min(len(cores), _MAX_COLS)
            rows = math.ceil(len(cores) / cols)
            layout.append((socket, d, x, y, cores, cols, rows))
            x += cols + 1.0
            tallest = max(tallest, rows)
        width = max(width, x)
        # Tall enough for the socket's devices too (Polaris: 4 GPUs beside one row of cores).
        tallest = max(tallest, sum(1 for d in node.devices if d.socket == socket))
        layout.append((socket, None, x, y, [], 0, tallest))
        y += tallest + 2.0
    dev_x = width + 0.5
    fig = None
    if ax is None:
        fig, ax = plt.subplots(figsize=(min(4 + 0.42 * (dev_x + 4), 16), 1.5 + 0.55 * y))
    else:
        fig = ax.figure
    for socket, domain, x0, y0, cores, cols, rows in layout:
        if domain is None:
            ax.add_patch(Rectangle((-0.4, y0 - 0.4), x0 - 0.2, rows + 0.8, fill=False, lw=1.5))
            ax.text(-0.6, y0 + rows / 2, f"socket {socket}", rotation=90, va="center", ha="right")
            _draw_devices(ax, plan, socket, dev_x, y0, rows, bad_ranks, Rectangle)
            continue
        ax.add_patch(
            Rectangle((x0 - 0.2, y0 - 0.2), cols + 0.4, rows + 0.4, fill=False, ls="--", lw=0.8)
        )
        ax.text(
            x0 + cols / 2, y0 + rows + 0.25, f"NUMA {domain}", ha="center", va="bottom", fontsize=8
        )
        for i, core in enumerate(cores):
            cx, cy = x0 + i % cols, y0 + rows - 1 - i // cols
            h = 0.9 / len(core)
            for k, cpu in enumerate(core):
                colour, hatch = cpu_colour(cpu)
                ax.add_patch(Rectangle((cx + 0.05, cy + 0.05 + (len(core) - 1 - k) * h), 0.9, h,
                                       facecolor=colour, hatch=hatch, edgecolor="white", lw=0.4))  # fmt: skip
            if any(c in ccl for c in core):
                ax.text(
                    cx + 0.5, cy + 0.5, "C", ha="center", va="center", fontsize=7, weight="bold"
                )
    handles = [Patch(facecolor=_rank_colour(r.rank), label=f"rank {r.rank}") for r in plan.ranks]
    if plan.style == "none":
        handles = [Patch(facecolor=_UNBOUND, label="any rank (unbound)")]
    handles += [
        Patch(facecolor=_RESERVED, hatch="///", label="reserved"),
        Patch(facecolor=_CLASH, label="collision"),
        Patch(facecolor=_FREE, edgecolor="grey", label="unused"),
    ]
    if ccl:
        handles.append(Patch(facecolor="white", edgecolor="black", label="C = CCL worker"))
    ax.legend(
        handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7, frameon=False
    )
    kinds = sorted({f.kind for f in plan.findings})
    ax.set_title(title or f"{plan.system} '{plan.preset}', {plan.ranks_per_node} ranks/node"
                 + (f" - problems: {', '.join(kinds)}" if kinds else " - no problems"), fontsize=10)  # fmt: skip
    ax.set_xlim(-1.5, dev_x + 3.5)
    ax.set_ylim(-1, y)
    ax.set_aspect("equal")
    ax.axis("off")
    fig.tight_layout()
    return fig, plan.table()


def _draw_devices(
    ax, plan: BindingPlan, socket: int, x: float, y0: float, rows: int, bad, Rectangle
) -> None:
    """The socket's devices, stacked beside it, coloured by the rank that drives each."""
    devices = [d for d in plan.node.devices if d.socket == socket]
    if not devices:
        return
    driver = {r.device: r.rank for r in plan.ranks if r.device is not None}
    step = max(rows, 1) / len(devices)
    for i, d in enumerate(devices):
        dy = y0 + max(rows, 1) - (i + 1) * step
        rank = driver.get(d.id)
        face = _rank_colour(rank) if rank is not None else _FREE
        edge = _CLASH if rank in bad else "black"
        ax.add_patch(Rectangle((x, dy + 0.05), 2.6, step * 0.9, facecolor=face, edgecolor=edge,
                               lw=2 if rank in bad else 0.8))  # fmt: skip
        label = f"{d.label} NUMA{d.numa}" + (f"  r{rank}" if rank is not None else "")
        ax.text(x + 1.3, dy + 0.05 + step * 0.45, label, ha="center", va="center", fontsize=6)
