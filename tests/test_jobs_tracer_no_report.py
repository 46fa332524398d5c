"""A job run under ncu whose kernel filter matched nothing ends COMPLETED with no report: the
learner is told so, with ncu's own line and the fix. Real local jobs (bash, Hydra mpiexec, the
kit's tracer wrapper) on a site record that lists ncu; ``ncu`` itself is a stand-in (no GPU
here) that behaves as Nsight Compute 2025.3 did on an H100 (docs/gpu-check.md): it runs the
app, and writes the report only if a kernel matched."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from hpcprof_kit.jobs import JobSpec, submit
from hpcprof_kit.jobs.explain import explain, missing_report, wait_for

LOCAL = Path(__file__).parents[1] / "hpcprof_kit" / "systems" / "local.toml"

STANDIN_NCU = r"""#!/usr/bin/env bash
# stand-in for Nsight Compute: -k picks kernels; the one kernel here has the name cuBLAS gave
# its bf16 GEMM on an H100
out="" kernel=""
while [[ $# -gt 0 && $1 == -* ]]; do
    case $1 in
        -o) out=$2; shift 2 ;;
        -k) kernel=$2; shift 2 ;;
        --set|--launch-skip|--launch-count|--profile-from-start) shift 2 ;;
        *) shift ;;
    esac
done
echo "==PROF== Connected to process $$ ($1)"
"$@"; rc=$?
echo "==PROF== Disconnected from process $$"
if [[ "nvjet_sm90_tst_192x192_64x3_2x1_v_bz_coopB_NNN" =~ ${kernel#regex:} ]]; then
    touch "${out//%q\{PMI_RANK\}/$PMI_RANK}.ncu-rep"
    echo "==PROF== Report: ${out//%q\{PMI_RANK\}/$PMI_RANK}.ncu-rep"
else
    echo "==WARNING== No kernels were profiled."
    echo "Available Kernels:"
    echo "1. nvjet_sm90_tst_192x192_64x3_2x1_v_bz_coopB_NNN"
fi
exit $rc
"""


@pytest.fixture
def workstation(tmp_path, monkeypatch) -> Path:
    """This machine as a site whose record lists ncu, and the ncu stand-in on PATH."""
    systems = tmp_path / "systems"
    systems.mkdir()
    record = LOCAL.read_text().replace('name = "local"', 'name = "workstation"')
    record = record.replace("vendor_tracers = []", 'vendor_tracers = ["ncu"]')
    (systems / "workstation.toml").write_text(record)
    monkeypatch.setenv("HPCPROF_SYSTEMS_DIR", str(systems))
    tools = tmp_path / "bin"
    tools.mkdir()
    (tools / "ncu").write_text(STANDIN_NCU)
    (tools / "ncu").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tools}:{Path(sys.executable).parent}:{os.environ['PATH']}")
    return tmp_path / "runs"


def ncu_job(runs: Path, kernel: str):
    spec = JobSpec(
        system="workstation",
        command=[sys.executable, "-c", "print('step 1 done')"],
        ranks_per_node=1,
        tracer="ncu",
        env={"NCU_KERNEL": kernel},
    )
    return submit(spec, runs_root=runs)


def test_a_filter_that_matched_no_kernel_is_named_after_the_wait_standin_ncu(workstation, capsys):
    job = ncu_job(workstation, "regex:gemm")
    assert wait_for(job, timeout=120, progress=False) == "COMPLETED"
    assert job.tail(5).count("step 1 done") == 1  # the app ran to its end
    shown = capsys.readouterr().out
    assert f"job {job.job_id} COMPLETED" in shown
    assert f"no ncu report: traces/ncu/ is empty in {job.run_dir}" in shown
    assert "| ==WARNING== No kernels were profiled." in shown
    assert "the kernels its filter matches (NCU_KERNEL='regex:gemm'), and none did" in shown
    assert "hpcprof-kit ncu-plan RUN_DIR" in shown
    assert missing_report(job) in explain(job)


def test_a_filter_that_matched_leaves_a_report_and_no_note_standin_ncu(workstation, capsys):
    job = ncu_job(workstation, "regex:gemm|nvjet")
    assert wait_for(job, timeout=120, progress=False) == "COMPLETED"
    reports = sorted(p.name for p in (job.run_dir / "traces" / "ncu").iterdir())
    assert reports == [f"{job.run_dir.name}_0.ncu-rep"]
    assert missing_report(job) is None
    assert "no ncu report" not in capsys.readouterr().out + explain(job)


def test_a_job_without_a_tracer_gets_no_report_note(tmp_path):
    job = submit(
        JobSpec(system="local", command=["echo", "hi"], ranks_per_node=1), runs_root=tmp_path
    )
    assert wait_for(job, timeout=60, progress=False) == "COMPLETED"
    assert missing_report(job) is None


def test_the_cli_says_it_after_submit_wait_standin_ncu(workstation, monkeypatch, capsys):
    from hpcprof_kit.cli import main

    monkeypatch.setenv("HPCPROF_RUNS_DIR", str(workstation))
    monkeypatch.setenv("NCU_KERNEL", "regex:gemm")  # the job inherits it; its spec has none
    argv = ["submit", "--system", "workstation", "--tracer", "ncu", "--ranks-per-node", "1"]
    assert main([*argv, "--wait", "--", sys.executable, "-c", "print('step 1 done')"]) == 0
    shown = capsys.readouterr().out
    assert "state: COMPLETED (exit code 0)" in shown
    assert "| ==WARNING== No kernels were profiled." in shown
    assert "(NCU_KERNEL=as the job's environment set it, if at all), and none did" in shown
