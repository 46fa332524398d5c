"""Binding plans: every preset encoded and checked, the known-bad ones flagged, generated plans
clean, launcher strings exact, bad input named, and the ``hpcprof-kit bind`` command."""

from __future__ import annotations

import json

import pytest

from hpcprof_kit.affinity import (
    generate_plan,
    load_presets,
    parse_cpu_bind,
    plan_for,
    preset_table,
    read_local,
)
from hpcprof_kit.cli import main
from hpcprof_kit.errors import BindingError

# Every list of the reference's "Aurora CPU-binding lists in circulation", verbatim.
AURORA_REFERENCE = {
    ("alcf-4core", 12): (
        "list:4-7:8-11:12-15:16-19:20-23:24-27:56-59:60-63:64-67:68-71:72-75:76-79",
        "42,43,44,45,46,47,94,95,96,97,98,99",
    ),
    ("alcf-8core", 12): (
        "list:1-8:9-16:17-24:25-32:33-40:41-48:53-60:61-68:69-76:77-84:85-92:93-100",
        None,
    ),
    ("alcf-16core-gpu", 6): ("list:1-16:17-32:33-48:53-68:69-84:85-100", None),
    ("alcf-4core", 2): ("list:4-7:8-11", "42,43"),
    ("alcf-4core", 1): ("list:4-7", "42"),
}


def _every_preset():
    for system in ("aurora", "polaris", "local", "slurm"):
        for name, preset in load_presets(system).items():
            counts = [lst["ranks"] for lst in preset.get("lists", [])] or preset["ranks"]
            for ranks in counts:
                yield pytest.param(system, name, ranks, id=f"{system}-{name}-{ranks}")


@pytest.mark.parametrize(("system", "name", "ranks"), list(_every_preset()))
def test_every_preset_gets_exactly_its_known_problems(system, name, ranks):
    plan = plan_for(system, ranks, name)
    expected = set(load_presets(system)[name]["known_problems"])
    assert {f.kind for f in plan.findings} == expected, plan
    assert plan.ranks_per_node == ranks and len(plan.ranks) == ranks


@pytest.mark.parametrize(("key", "lists"), AURORA_REFERENCE.items(), ids=str)
def test_aurora_reference_lists_are_encoded_verbatim(key, lists):
    cpu_list, ccl = lists
    plan = plan_for("aurora", key[1], key[0])
    assert plan.launcher_args("pals") == ["--cpu-bind", cpu_list]
    assert plan.env().get("CCL_WORKER_AFFINITY") == ccl


def test_aurora_two_rank_list_keeps_its_device_mask():
    assert plan_for("aurora", 2).env() == {
        "ZE_AFFINITY_MASK": "0,1",
        "CCL_WORKER_AFFINITY": "42,43",
    }


def test_aurora_core0_list_hits_the_reserved_cores_of_ranks_0_and_6():
    plan = plan_for("aurora", 12, "outdated-core0")
    assert [(f.rank, f.kind, f.severity) for f in plan.findings] == [
        (0, "reserved", "error"),
        (6, "reserved", "error"),
    ]
    assert "0" in plan.findings[0].message and "52" in plan.findings[1].message


def test_aurora_depth8_with_12_ranks_splits_rank_6_across_sockets():
    plan = plan_for("aurora", 12, "depth-8")
    assert plan.launcher_args("pals") == ["--depth=8", "--cpu-bind", "depth"]
    # PALS skips the reserved cores 0 and 52 (ALCF's output; see tests/test_pals_placement.py)
    assert plan.ranks[6].cpus == (49, 50, 51, 53, 54, 55, 56, 57)
    assert [(f.rank, f.kind) for f in plan.findings] == [(6, "split")]
    assert "spans sockets [0, 1] (CPUs 49-51,53-57)" in plan.findings[0].message


def test_polaris_common_mistake_crosses_numa_for_every_rank():
    plan = plan_for("polaris", 4, "common-mistake")
    assert [(f.rank, f.kind) for f in plan.findings] == [(r, "numa") for r in range(4)]
    assert "GPU0, which sits next to NUMA 3" in plan.findings[0].message
    assert plan.table()["problems"].tolist() == ["numa"] * 4


def test_polaris_default_is_numa_correct_and_helper_masks_in_reverse():
    assert plan_for("polaris", 4).launcher_args("pals") == [
        "--cpu-bind",
        "list:24-31:16-23:8-15:0-7",
    ]
    helper = plan_for("polaris", 4, "alcf-helper")
    assert helper.launcher_args("pals") == ["--depth=8", "--cpu-bind", "depth"]
    assert [r.index for r in helper.ranks] == [3, 2, 1, 0] and helper.needs_wrapper
    assert "masks=(3 2 1 0)" in helper.rank_wrapper()
    assert 'export CUDA_VISIBLE_DEVICES="${masks[$local_rank % 4]}"' in helper.rank_wrapper()


@pytest.mark.parametrize(("system", "ranks"), [("aurora", r) for r in (1, 2, 4, 6, 8, 12)]
                         + [("polaris", r) for r in (1, 2, 4)])  # fmt: skip
def test_generated_plans_have_no_findings(system, ranks):
    plan = plan_for(system, ranks, "auto")
    assert plan.findings == ()
    node = plan.node
    used = [c for r in plan.ranks for c in r.cpus]
    assert len(used) == len(set(used)) and not set(used) & node.reserved
    for r in plan.ranks:  # whole cores: every sibling of a rank's CPU is the rank's too
        assert all(s in r.cpus for c in r.cpus for s in node.siblings(c))


def test_generated_local_plan_from_this_machine_is_clean():
    cores = len(read_local().cores)
    assert plan_for("local", cores, "auto").findings == ()


def test_generated_aurora_plan_reserves_ccl_cores_per_socket():
    plan = generate_plan("aurora", ranks_per_node=12)
    assert plan.ccl_workers == (46, 47, 48, 49, 50, 51, 98, 99, 100, 101, 102, 103)
    assert plan.ranks[0].cpus[:7] == (1, 2, 3, 4, 5, 6, 7)


def test_checks_flag_shared_sibling_ccl_and_workers():
    plan = plan_for("aurora", 2, "list:1-4:4-5,108", dataloader_workers=4)
    kinds = [(f.rank, f.kind) for f in plan.findings]
    assert (1, "shared") in kinds  # CPU 4 in both ranks
    assert (1, "sibling") in kinds or (0, "sibling") in kinds  # 108 is CPU 4's hyperthread
    assert (1, "workers") in kinds  # 3 CPUs for 4 workers
    ccl = plan_for("aurora", 2, "alcf-4core")
    assert ccl.findings == ()
    from hpcprof_kit.affinity import check_ranks

    found = check_ranks(ccl.node, ccl.ranks, ccl_workers=(5, 42))
    assert [(f.rank, f.kind) for f in found] == [(0, "ccl")]


def test_launcher_strings_for_hydra_and_srun():
    plan = plan_for("local", 2, "reversed")
    assert plan.launcher_args("hydra") == ["-bind-to", "user:1,0"]
    assert plan.launcher_args("srun") == ["--cpu-bind=map_cpu:1,0"]
    four = plan_for("aurora", 2)
    assert four.launcher_args("hydra") == ["-bind-to", "user:4+5+6+7,8+9+10+11"]
    assert four.launcher_args("srun") == ["--cpu-bind=mask_cpu:0xf0,0xf00"]
    assert plan_for("local", 2, "none").launcher_args("hydra") == ["-bind-to", "none"]


@pytest.mark.parametrize(
    ("text", "style", "cpus", "depth"),
    [
        ("list:4-7:8-11", "list", ((4, 5, 6, 7), (8, 9, 10, 11)), None),
        ("--cpu-bind list:0,1:8,9", "list", ((0, 1), (8, 9)), None),
        ("--depth=8 --cpu-bind depth", "depth", (), 8),
        ("--cpu-bind=depth --depth=8", "depth", (), 8),
        ("depth:4", "depth", (), 4),
        ("user:1,0", "list", ((1,), (0,)), None),
        ("-bind-to user:0+1,2+3", "list", ((0, 1), (2, 3)), None),
        ("map_cpu:1,0", "list", ((1,), (0,)), None),
        ("--cpu-bind=mask_cpu:0x3,0xc", "list", ((0, 1), (2, 3)), None),
        ("core", "core", (), None),
        ("none", "none", (), None),
    ],
)
def test_parse_cpu_bind_forms(text, style, cpus, depth):
    parsed = parse_cpu_bind(text)
    assert (parsed.style, parsed.cpus, parsed.depth) == (style, cpus, depth)


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda: parse_cpu_bind("list:4-7:8-x"), ["'8-x'", "4-7"]),
        (lambda: parse_cpu_bind("list:7-4"), ["'7-4'", "backwards"]),
        (lambda: parse_cpu_bind("bogus:1"), ["'bogus'", "list:4-7:8-11"]),
        (lambda: parse_cpu_bind("depth"), ["depth", "--depth=8"]),
        (lambda: plan_for("aurora", 2, "list:4-7:8-300"), ["8-300", "207"]),
        (lambda: plan_for("polaris", 5, "auto"), ["5", "4 devices", "limit"]),
        (lambda: plan_for("aurora", 13), ["alcf-4core", "12", "limit", "auto"]),
        (lambda: plan_for("aurora", 3, "list:4-7:8-11"), ["lists 2 ranks", "ranks_per_node is 3"]),
        (lambda: plan_for("aurora", 12, "depth:20"), ["240", "204", "208 less 4 reserved"]),
        (lambda: plan_for("aurora", 0), ["ranks_per_node", "at least 1"]),
        (lambda: plan_for("local", 1, "user:0").launcher_args("aprun"), ["'aprun'", "pals"]),
    ],
)
def test_bad_input_names_token_and_limit(call, words):
    with pytest.raises(BindingError) as info:
        call()
    for word in words:
        assert word in str(info.value)


def test_read_local_from_a_two_socket_sys_tree_standin(tmp_path):
    """A /sys tree of a 2-socket, 2-thread node written by the test (this machine has one)."""
    cpu_root = tmp_path / "devices" / "system" / "cpu"
    for cpu in range(8):
        topo = cpu_root / f"cpu{cpu}" / "topology"
        topo.mkdir(parents=True)
        core = cpu % 4
        (topo / "physical_package_id").write_text(f"{core // 2}\n")
        (topo / "core_id").write_text(f"{core % 2}\n")
        (topo / "thread_siblings_list").write_text(f"{core},{core + 4}\n")
    for node, cpus in ((0, "0-1,4-5"), (1, "2-3,6-7")):
        (tmp_path / "devices" / "system" / "node" / f"node{node}").mkdir(parents=True)
        (tmp_path / "devices" / "system" / "node" / f"node{node}" / "cpulist").write_text(cpus)
    node = read_local(tmp_path)
    assert node.cores == ((0, 4), (1, 5), (2, 6), (3, 7))
    assert [node.socket_of(c) for c in range(8)] == [0, 0, 1, 1, 0, 0, 1, 1]
    assert node.numa_of(6) == 1 and node.siblings(1) == (1, 5)


def test_read_local_matches_this_machine():
    import os

    node = read_local()
    assert set(node.cpu_ids) >= set(os.sched_getaffinity(0))


def test_cli_check_json_and_exit_code(capsys):
    assert main(["bind", "check", "--system", "aurora", "--cpu-bind",
                 "list:0-7:8-15", "--json"]) == 1  # fmt: skip
    data = json.loads(capsys.readouterr().out)
    assert data == {
        "findings": [
            {
                "rank": 0,
                "kind": "reserved",
                "severity": "error",
                "message": data["findings"][0]["message"],
            }
        ]
    }
    assert main(["bind", "check", "--system", "polaris", "--cpu-bind",
                 "list:24-31:16-23:8-15:0-7"]) == 0  # fmt: skip
    assert "no findings" in capsys.readouterr().out
    assert main(["bind", "check", "--system", "aurora", "--cpu-bind", "list:4-x"]) == 2


def test_cli_plan_json_shape_and_presets(capsys):
    assert main(["bind", "plan", "--system", "polaris", "--ranks-per-node", "4", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["cpu_bind"] == "--cpu-bind list:24-31:16-23:8-15:0-7"
    assert data["ranks"][0] == {"rank": 0, "cpus": list(range(24, 32)), "device": 0,
                                "select": "set_device(0)"}  # fmt: skip
    assert data["findings"] == [] and data["system"] == "polaris" and data["ranks_per_node"] == 4
    assert main(["bind", "presets", "--system", "aurora", "--json"]) == 0
    names = [row["name"] for row in json.loads(capsys.readouterr().out)]
    assert names == [row["name"] for row in preset_table("aurora")]
    assert {"alcf-4core", "outdated-core0", "depth-8", "none", "auto"} <= set(names)


def test_nb07_checker_accepts_numa_correct_and_hints_on_the_mistake(capsys):
    from hpcprof_kit.exercises.nb07 import check_polaris_list

    assert check_polaris_list("list:24-31:16-23:8-15:0-7") is True
    assert "Correct" in capsys.readouterr().out
    assert check_polaris_list("list:0,1:8,9:16,17:24,25") is False
    out = capsys.readouterr().out
    # what the check saw, not the rule nor the CPUs that answer it
    assert out.startswith("Not yet. Hint: rank 0 runs in NUMA domain(s) [0]")
    assert "next to NUMA 3" in out and "24-31" not in out
    assert check_polaris_list("list:oops") is False
    assert "does not parse" in capsys.readouterr().out
