"""What ranks really got: real 2-rank Hydra jobs of the affinity report, compared with plans."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from hpcprof_kit.affinity import format_cpus, plan_for, read_local
from hpcprof_kit.affinity.report import compare, parse_report
from hpcprof_kit.errors import BindingError

pytestmark = pytest.mark.mpi


def _run(mpiexec: str, launcher_args: list[str]) -> str:
    cmd = [mpiexec, "-n", "2", *launcher_args, sys.executable, "-m",
           "hpcprof_kit.apps.affinity_report"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture(scope="module")
def two_cores():
    if len(read_local().cores) < 2 or len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs a machine with 2 cores free to this process")
    return read_local()


def test_bind_to_core_matches_its_plan_and_none_shows_unbound(mpiexec, two_cores):
    core = plan_for("local", 2, "core")
    none = plan_for("local", 2, "none")
    assert core.launcher_args("hydra") == ["-bind-to", "core"]
    bound = parse_report(_run(mpiexec, core.launcher_args("hydra")))
    loose = parse_report(_run(mpiexec, none.launcher_args("hydra")))

    # The report shows the difference: one core each, versus the whole machine each.
    everything = format_cpus(two_cores.cpu_ids)
    assert bound["rank"].tolist() == [0, 1] and loose["rank"].tolist() == [0, 1]
    assert bound["cpus"].tolist() == [format_cpus(c) for c in two_cores.cores[:2]]
    assert loose["cpus"].tolist() == [everything, everything]
    assert bound["unbound"].tolist() == [False, False]
    assert loose["unbound"].tolist() == [True, True]

    # The comparison flags nothing for -bind-to core, and both ranks as unbound for none.
    assert compare(core, bound)["verdict"].tolist() == ["ok", "ok"]
    flagged = compare(none, loose)
    assert flagged["verdict"].tolist() == ["unbound", "unbound"]
    assert "every online CPU" in flagged.loc[0, "message"]


def test_reversed_binding_is_flagged_against_the_core_plan(mpiexec, two_cores):
    reversed_plan = plan_for("local", 2, "reversed")
    got = parse_report(_run(mpiexec, reversed_plan.launcher_args("hydra")))
    assert compare(reversed_plan, got)["verdict"].tolist() == ["ok", "ok"]
    wrong = compare(plan_for("local", 2, "core"), got)
    assert wrong["verdict"].tolist() == ["mismatch", "mismatch"]
    assert "the plan says" in wrong.loc[0, "message"]


def test_missing_rank_and_empty_output():
    plan = plan_for("polaris", 4)
    one = ("[0] affinity_report host=x3004 rank=0 local_rank=0 world_size=1 cpus=24-31 "
           "online=0-63 numa=3 device=0")  # fmt: skip
    table = compare(plan, one)
    assert table["verdict"].tolist() == ["ok", "missing", "missing", "missing"]
    swapped = one.replace("device=0", "device=3")
    assert compare(plan, swapped).loc[0, "verdict"] == "device"
    with pytest.raises(BindingError, match="no 'affinity_report' line"):
        parse_report("hello\nworld\n")
