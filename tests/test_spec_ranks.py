"""Which ranks a vendor tracer traces: the seeds' PROFRANK/RANKCUTOFF values, the exact ranks
named in the job script, and one rule shared by JobSpec, the wrapper and traced_ranks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpcprof_kit.cli import main
from hpcprof_kit.errors import SpecError
from hpcprof_kit.jobs import JobSpec
from hpcprof_kit.ranks import LOCAL_RANK_VARS, RANK_VARS
from hpcprof_kit.tracer_ranks import describe_traced_ranks, traced_ranks
from hpcprof_kit.tracers import wrapper_script

STANDIN = Path(__file__).parent / "standin"
AURORA_4x12 = ["--system", "aurora", "--nodes", "4", "--ranks-per-node", "12",
               "--queue", "debug-scaling", "--tracer", "unitrace", "--account", "P"]  # fmt: skip


def comment_line(script: str) -> str:
    (line,) = [x for x in script.splitlines() if x.startswith("# Vendor tracer wrapper")]
    return line


def render_cli(capsys, *args: str) -> str:
    assert main(["render", *args]) == 0
    return capsys.readouterr().out


def test_seed_000_aurora_rankcutoff_48_on_4x12_traces_local_rank_0_of_each_node(capsys):
    script = render_cli(capsys, *AURORA_4x12, "--rankcutoff", "48")
    assert comment_line(script) == (
        "# Vendor tracer wrapper (unitrace): traces ranks 0, 12, 24, 36; runs the others plainly."
    )
    assert 'RANKCUTOFF="${RANKCUTOFF-48}"' in script and 'PROFRANK="${PROFRANK-0}"' in script


@pytest.mark.parametrize("queue", ["debug-scaling", "debug"])
def test_seed_001_polaris_rankcutoff_8_on_2x4_traces_0_and_4(capsys, queue):
    script = render_cli(capsys, "--system", "polaris", "--nodes", "2", "--ranks-per-node", "4",
                        "--queue", queue, "--tracer", "nsys", "--account", "P",
                        "--rankcutoff", "8")  # fmt: skip
    assert comment_line(script) == (
        "# Vendor tracer wrapper (nsys): traces ranks 0, 4; runs the others plainly."
    )


def test_cutoff_inside_a_node_is_not_a_range(capsys):
    # The old comment said "0-13" here, while the wrapper traces ranks 0 and 12.
    script = render_cli(capsys, *AURORA_4x12, "--nodes", "2", "--rankcutoff", "13")
    assert comment_line(script) == (
        "# Vendor tracer wrapper (unitrace): traces ranks 0, 12; runs the others plainly."
    )


def test_no_cutoff_says_every_node_with_the_exact_ranks(capsys):
    script = render_cli(capsys, *AURORA_4x12, "--nodes", "2", "--profrank", "3")
    assert comment_line(script) == (
        "# Vendor tracer wrapper (unitrace): traces local rank 3 of every node (ranks 3, 15); "
        "runs the others plainly."
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((48, 12, 0, 48), "ranks 0, 12, 24, 36"),
        ((24, 12, 0, 13), "ranks 0, 12"),
        ((24, 12, 0, None), "local rank 0 of every node (ranks 0, 12)"),
        ((8, 4, 1, 2), "rank 1"),
        ((1200, 12, 0, 1200), "ranks 0, 12, 24, ..., 1188 (100 ranks)"),
        ((1200, 12, 5, None), "local rank 5 of every node (ranks 5, 17, 29, ..., 1193 (100 ranks))"),
        ((72, 12, 0, None), "local rank 0 of every node (ranks 0, 12, 24, 36, 48, 60)"),
        ((84, 12, 0, None), "local rank 0 of every node (ranks 0, 12, 24, ..., 72 (7 ranks))"),
    ],
)  # fmt: skip
def test_traced_ranks_in_words(args, expected):
    assert describe_traced_ranks(*args) == expected


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"profrank": 12},
         "profrank 12 is outside 0-11: it is a local rank (compared with the launcher's local "
         "rank, e.g. PALS_LOCAL_RANKID) and the job runs 12 ranks per node; pick the local rank "
         "to trace on each node, e.g. profrank=0"),
        ({"rankcutoff": 49},
         "rankcutoff 49 is outside 1-48 (the cutoff is exclusive: ranks below it whose local "
         "rank is 0 are traced, and the first of them is rank 0; the job has 48 ranks); pick "
         "1-48 (rankcutoff=48 traces local rank 0 on every node), or None for no cutoff"),
        ({"profrank": 2, "rankcutoff": 2},
         "rankcutoff 2 is outside 3-48 (the cutoff is exclusive: ranks below it whose local "
         "rank is 2 are traced, and the first of them is rank 2; the job has 48 ranks); pick "
         "3-48 (rankcutoff=48 traces local rank 2 on every node), or None for no cutoff"),
        ({"profrank": "0"}, "profrank '0' is not a whole number; pass an int such as profrank=0"),
    ],
)  # fmt: skip
def test_spec_errors_name_field_value_limit_and_fix(fields, expected):
    spec = JobSpec(system="aurora", nodes=4, ranks_per_node=12, queue="debug-scaling",
                   account="P", tracer="unitrace", **fields)  # fmt: skip
    with pytest.raises(SpecError) as info:
        spec.validate()
    assert str(info.value) == expected


def test_cli_error_is_one_line_on_stderr(capsys):
    assert main(["render", *AURORA_4x12, "--rankcutoff", "49"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith("hpcprof-kit render: rankcutoff 49 is outside 1-48 (the cutoff is")


# (profrank, rankcutoff) on 2 nodes x 4 ranks: the spec and the wrapper agree on each.
SELECTIONS = [(0, None), (3, None), (0, 1), (3, 4), (1, 8), (4, None), (0, 0), (2, 2), (0, 9),
              (-1, None)]  # fmt: skip


@pytest.mark.parametrize(("profrank", "rankcutoff"), SELECTIONS)
def test_spec_and_wrapper_accept_and_refuse_the_same_selections(profrank, rankcutoff):
    spec = JobSpec(system="polaris", nodes=2, ranks_per_node=4, account="P", tracer="nsys",
                   profrank=profrank, rankcutoff=rankcutoff)  # fmt: skip
    outcomes = []
    for check in (
        spec.validate,
        lambda: wrapper_script(
            "nsys", "polaris", profrank, rankcutoff, world_size=8, ranks_per_node=4
        ),
    ):
        try:
            check()
            outcomes.append("ok")
        except SpecError as exc:
            outcomes.append(str(exc))
    assert outcomes[0] == outcomes[1]
    if outcomes[0] == "ok":  # whatever is accepted traces at least one rank
        assert traced_ranks(8, 4, profrank, rankcutoff)


def test_wrapper_without_the_job_shape_refuses_what_no_job_can_trace():
    with pytest.raises(SpecError, match=r"^rankcutoff 2 traces no rank \(the cutoff is exclusive"):
        wrapper_script("unitrace", "aurora", profrank=2, rankcutoff=2)
    with pytest.raises(SpecError, match=r"^profrank -1 is negative: it is a local rank"):
        wrapper_script("unitrace", "aurora", profrank=-1)


def test_wrapper_header_names_the_exact_ranks_when_the_job_shape_is_given():
    text = wrapper_script("unitrace", "aurora", 0, 48, world_size=48, ranks_per_node=12)
    assert "# This job (48 ranks, 12 per node) traces ranks 0, 12, 24, 36." in text.splitlines()
    plain = wrapper_script("unitrace", "aurora", 0, 48)
    assert not any(line.startswith("# This job") for line in plain.splitlines())


@pytest.mark.parametrize(("profrank", "rankcutoff"), [(0, 48), (0, 13), (1, None), (11, 30)])
def test_traced_ranks_is_the_wrappers_own_rule(tmp_path, profrank, rankcutoff):
    """Run the real wrapper once per rank of 4 x 12 (PALS variables, standin unitrace) and
    compare the ranks it traced with traced_ranks()."""
    wrapper = tmp_path / "tracer.sh"
    wrapper.write_text(wrapper_script("unitrace", "aurora", profrank, rankcutoff))
    unset = {"PROFRANK", "RANKCUTOFF", *(name for name, _ in RANK_VARS), *LOCAL_RANK_VARS}
    base = {k: v for k, v in os.environ.items() if k not in unset}
    base.update(HPCPROF_RUN_DIR=str(tmp_path), PYTHON=sys.executable,
                PATH=f"{STANDIN}{os.pathsep}{os.environ['PATH']}")  # fmt: skip
    for rank in range(48):  # as PALS numbers them: block placement, 12 per node
        env = {**base, "PMI_RANK": str(rank), "PALS_LOCAL_RANKID": str(rank % 12)}
        subprocess.run(["bash", str(wrapper), "true"], env=env, check=True, timeout=60)
    records = (tmp_path / "traces" / "unitrace").glob("standin-*.json")
    traced = sorted(json.loads(p.read_text())["rank"] for p in records)
    assert traced == traced_ranks(48, 12, profrank, rankcutoff)
