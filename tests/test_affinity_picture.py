"""The node picture: Aurora 12 ranks and Polaris 4 ranks, saved as PNGs beside the test."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402
from matplotlib.colors import to_hex  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from hpcprof_kit.affinity import plan_for  # noqa: E402
from hpcprof_kit.affinity.picture import draw_plan  # noqa: E402

RED = "#d62728"


def _red_cells(fig) -> int:
    return sum(
        1
        for p in fig.axes[0].patches
        if isinstance(p, Rectangle) and p.get_fill() and to_hex(p.get_facecolor()) == RED
    )


def _red_devices(fig) -> int:
    return sum(1 for p in fig.axes[0].patches if p.get_fill() and to_hex(p.get_edgecolor()) == RED)


@pytest.mark.parametrize(
    ("system", "ranks", "preset", "clashes", "bad_devices"),
    [
        ("aurora", 12, "alcf-4core", 0, 0),
        ("aurora", 12, "depth-8", 0, 1),  # PALS skips cores 0 and 52; rank 6 spans sockets
        ("aurora", 12, "outdated-core0", 2, 2),
        ("polaris", 4, "numa-correct", 0, 0),
        ("polaris", 4, "common-mistake", 0, 4),  # every rank drives a far GPU
    ],
)
def test_pictures_mark_the_problems(tmp_path, system, ranks, preset, clashes, bad_devices):
    plan = plan_for(system, ranks, preset)
    fig, table = draw_plan(plan)
    out = tmp_path / f"{system}-{ranks}-{preset}.png"
    fig.savefig(out, dpi=80)
    assert out.stat().st_size > 10_000
    assert table["cpus"].tolist() == plan.table()["cpus"].tolist() and len(table) == ranks
    assert (_red_cells(fig), _red_devices(fig)) == (clashes, bad_devices)
    title = fig.axes[0].get_title()
    assert title.startswith(f"{system} '{preset}', {ranks} ranks/node")
    assert ("no problems" in title) == (not plan.findings)
    # one cell per logical CPU of the node
    cells = [p for p in fig.axes[0].patches if to_hex(p.get_edgecolor()) == "#ffffff"]
    assert len(cells) == len(plan.node.cpus)
    matplotlib.pyplot.close(fig)
