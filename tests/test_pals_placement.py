"""PALS ``--cpu-bind depth`` places ranks as ALCF's own output shows.

Source: ALCF Aurora user guide, "Running Jobs on Aurora", section "Binding MPI ranks and threads
to cores" (https://docs.alcf.anl.gov/aurora/running-jobs-aurora/; argonne-lcf/user-guides
docs/aurora/running-jobs-aurora.md). PALS walks the logical CPUs in order and skips the cores
reserved for system services since 2025-03-31 (0 and 52, with hyperthreads 104 and 156).
"""

from __future__ import annotations

import pytest

from hpcprof_kit.affinity import plan_for
from hpcprof_kit.affinity.cpulist import format_cpus
from hpcprof_kit.errors import BindingError

# "Example 4: 1 node, 12 ranks/node", the depth variant, verbatim from its HWT column:
# $ mpiexec -n 12 -ppn 12 --depth=8 --cpu-bind=depth ./hello_affinity_aurora.out | sort
ALCF_DEPTH8_HWT = [
    "1-8", "9-16", "17-24", "25-32", "33-40", "41-48",
    "49-51,53-57", "58-65", "66-73", "74-81", "82-89", "90-97",
]  # fmt: skip


def _hwt(plan) -> list[str]:
    return [format_cpus(r.cpus) for r in plan.ranks]


def test_aurora_depth8_12_ranks_matches_alcf_output_rank_by_rank():
    plan = plan_for("aurora", 12, "depth-8")
    assert _hwt(plan) == ALCF_DEPTH8_HWT
    assert plan.ranks[0].cpus == (1, 2, 3, 4, 5, 6, 7, 8)
    assert plan.ranks[5].cpus == tuple(range(41, 49))
    assert plan.ranks[6].cpus == (49, 50, 51, 53, 54, 55, 56, 57)
    assert plan.ranks[11].cpus == tuple(range(90, 98))


def test_aurora_depth8_uses_no_reserved_core_but_still_splits_rank_6():
    plan = plan_for("aurora", 12, "depth-8")
    used = {c for r in plan.ranks for c in r.cpus}
    assert not used & {0, 52, 104, 156}
    assert [(f.rank, f.kind, f.severity) for f in plan.findings] == [(6, "split", "error")]
    assert plan.findings[0].message == (
        "rank 6 spans sockets [0, 1] (CPUs 49-51,53-57): half its memory traffic crosses the "
        "socket link; keep a rank on one socket"
    )


def test_aurora_depth1_4_ranks_per_node_starts_at_cpu_1():
    # "Example 1": mpiexec -n 8 -ppn 4 --depth 1 --cpu-bind=depth -> HWT 1, 2, 3, 4 on each node
    plan = plan_for("aurora", 4, "--depth 1 --cpu-bind=depth")
    assert [r.cpus for r in plan.ranks] == [(1,), (2,), (3,), (4,)]
    assert plan.findings == ()


def test_aurora_depth2_2_ranks_per_node():
    # "Example 2": mpiexec -n 4 -ppn 2 --depth=2 --cpu-bind=depth -> HWT 1-2 and 3-4
    assert _hwt(plan_for("aurora", 2, "--depth=2 --cpu-bind=depth")) == ["1-2", "3-4"]


def test_polaris_depth_has_no_reserved_cores_and_starts_at_0():
    plan = plan_for("polaris", 4, "alcf-helper")
    assert _hwt(plan) == ["0-7", "8-15", "16-23", "24-31"]
    assert _hwt(plan_for("polaris", 4, "depth:1")) == ["0", "1", "2", "3"]


def test_the_core0_list_is_still_the_reserved_core_mistake():
    plan = plan_for("aurora", 12, "outdated-core0")
    assert [(f.rank, f.kind) for f in plan.findings] == [(0, "reserved"), (6, "reserved")]


def test_depth_beyond_the_usable_cpus_names_both_counts():
    with pytest.raises(BindingError) as info:
        plan_for("aurora", 12, "depth:18")
    assert str(info.value) == (
        "depth 18 x 12 ranks needs 216 CPUs, beyond the node's limit of 204 CPUs (208 less 4 "
        "reserved); lower --depth or the ranks per node"
    )
