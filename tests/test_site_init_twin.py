"""``hpcprof-kit site init`` on a cluster that is neither Aurora nor Polaris, then jobs and a
sweep with the record it wrote (issue #36).

PBS: a real PBS server cannot be installed here, so a small generic OpenPBS cluster is the
rehearsal twin's stand-in (``twin.build_generic``: one node, one queue that takes one queued job
per user, no ``filesystems`` resource, job history off), answering ``qstat -Qf``,
``pbsnodes -av`` and ``qmgr -c 'p s'`` in OpenPBS 23.06's format; its ranks are real Hydra
ranks. Slurm: the real slurmctld/slurmd of ``cluster_env``.

The user's ``$HOME`` is an empty folder of the test's: nothing of the kit may land there.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hpcprof_kit.cli import main
from hpcprof_kit.jobs import JobSpec, RunDir, submit
from hpcprof_kit.jobs.sweep import Sweep
from hpcprof_kit.rehearsal import twin as twin_mod
from hpcprof_kit.systems import load_system

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(600)]

# Each variant runs `bash -c 'exit "$2"' v --code N`: it ends with the exit code it is given.
EXIT_AS_TOLD = ["--", "bash", "-c", 'exit "$2"', "v"]
PROBE = ("import os; os.write(1, (os.environ['PMI_RANK'] + ' ' + "
         "os.environ['HPCPROF_SYSTEMS_DIR'] + '\\n').encode())")  # fmt: skip


@pytest.fixture
def user_home(tmp_path, monkeypatch) -> Path:
    """The submitting user's $HOME: an empty folder that must stay empty."""
    home = tmp_path / "user-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture
def lake(tmp_path, monkeypatch, isolated_runs, user_home, capsys):
    """The generic PBS stand-in (twin) and its record written by ``site init --scheduler pbs``,
    with the one line the user edits: the venv that holds the kit."""
    twin = twin_mod.build_generic(
        tmp_path / "twin", "lake", kill_grace_s=1.0,
        queues={"workq": {"max_nodes": 1, "max_walltime": "00:30:00", "max_queued": 1}},
    )  # fmt: skip
    records = tmp_path / "records"
    monkeypatch.setenv("PATH", f"{twin.bin}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("HPCPROF_SYSTEMS_DIR", str(records))
    assert main(["site", "init", "--scheduler", "pbs"]) == 0
    path = records / "lake.toml"
    assert f"wrote {path} (1 queues, 1 node)" in capsys.readouterr().out
    text = path.read_text()
    old = '# default_venv = "$HOME/venvs/hpcprof-kit"'
    assert old in text
    path.write_text(text.replace(old, f"default_venv = {json.dumps(str(twin.kit_venv))}"))
    return twin


def test_site_init_against_the_generic_pbs_twin_writes_the_servers_record(lake):
    rec = load_system("lake")
    assert (rec.scheduler, rec.launcher, rec.default_queue) == ("pbs", "hydra", "workq")
    assert not rec.account_required and rec.default_filesystems == ""
    workq = rec.queues["workq"]
    assert (workq.min_nodes, workq.max_nodes, workq.max_walltime) == (1, 1, "00:30:00")
    assert rec.extra["queue_rules"]["workq"] == {"max_jobs_per_user": 1}
    assert rec.extra["cluster"]["job_history"] is False  # qmgr: no job_history_enable
    assert rec.extra["cluster"]["resources"] == []
    assert rec.extra["pbs_select_suffix"] == ":ncpus=2"  # pbsnodes: 2 cores on the node


def test_twin_generic_pbs_two_rank_job_completes_with_the_record_it_exported(
    lake, tmp_path, user_home
):
    spec = JobSpec(system="lake", ranks_per_node=2, walltime="00:05:00", binding="none",
                   command=["python3", "-c", PROBE])  # fmt: skip
    job = submit(spec, backend="pbs")
    assert job.wait(timeout=120, progress=False) == "COMPLETED"
    records = str(tmp_path / "records")
    assert sorted(job.tail().splitlines()) == [f"{r} {records}" for r in (0, 1)]
    script = (Path(job.run_dir) / "job.sh").read_text()
    assert "#PBS -l filesystems" not in script and "#PBS -A" not in script
    assert f"export HPCPROF_SYSTEMS_DIR={records}\n" in script
    # the job started with PBS's variables only: the record's folder came from the script
    (started,) = lake.events("job_start")
    assert "HPCPROF_SYSTEMS_DIR" not in started["env"] and "PBS_JOBID" in started["env"]
    assert list(user_home.iterdir()) == []


def test_twin_generic_pbs_sweep_in_turn_each_variant_by_its_record_then_resume(
    lake, user_home, capsys
):
    """max_queued = 1: the three variants run in turn in one job; history is off, so after
    the job only each variant's own record tells COMPLETED / FAILED / COMPLETED."""
    common = ["sweep", "--system", "lake", "--backend", "pbs", "--ranks-per-node", "1",
              "--walltime", "00:05:00", "--binding", "none"]  # fmt: skip
    assert main([*common, "--vary=--code=0,2,0", "--wait", *EXIT_AS_TOLD]) in (0, 1)
    capsys.readouterr()
    sweep_dir = next(Path(os.environ["HPCPROF_RUNS_DIR"]).rglob("sweep.json")).parent
    sweep = Sweep.load(sweep_dir)
    assert "for run_dir in" in (sweep.path / "array.sh").read_text()  # in turn, one job
    assert sweep.refresh() == {0: "COMPLETED", 1: "FAILED", 2: "COMPLETED"}
    first = [e["run_dir"] for e in sweep.record()["variants"]]
    codes = [RunDir(sweep.path / r).manifest().get("exit_code") for r in first]
    assert codes == [0, 2, 0]
    assert len([e for e in lake.events("qsub") if e["ok"]]) == 1

    assert main(["sweep", "--resume", str(sweep_dir), "--backend", "pbs", "--wait"]) in (0, 1)
    again = Sweep.load(sweep_dir)
    rerun = again.record()["variants"]
    assert [e["run_dir"] for e in rerun][0::2] == first[0::2]  # 0 and 2 kept as they were
    assert rerun[1]["run_dir"] != first[1] and rerun[1]["earlier_runs"] == [first[1]]
    script = (sweep.path / "array-1.sh").read_text()
    assert script.count("bash job.sh") == 1 and rerun[1]["run_dir"] in script
    assert again.refresh() == {0: "COMPLETED", 1: "FAILED", 2: "COMPLETED"}
    assert len([e for e in lake.events("job_start")]) == 2  # the first job, then the rerun
    assert list(user_home.iterdir()) == []
    # the job's own HOME (the twin's) holds only what the site gave it
    assert sorted(p.name for p in lake.home.iterdir()) == [".bash_profile", "venvs"]


def test_twin_generic_pbs_refuses_an_alcf_filesystems_request(lake, tmp_path):
    """The generic server has no 'filesystems' resource: qsub refuses it as unknown, exit 187
    as the third real server did (cases.md row 56; the first one exited 166)."""
    import subprocess

    script = tmp_path / "fs.sh"
    script.write_text("#!/bin/bash -l\n#PBS -l select=1\n#PBS -l walltime=00:05:00\n"
                      "#PBS -l filesystems=home:flare\ntrue\n")  # fmt: skip
    done = subprocess.run(["qsub", str(script)], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path)  # fmt: skip
    assert (done.returncode, done.stderr.strip()) == (
        187,
        "qsub: Unknown resource Resource_List.filesystems",
    )


# ---- real Slurm ------------------------------------------------------------------------------
@pytest.mark.slurm
def test_site_init_on_real_slurm_then_a_sweep_with_a_failing_variant_and_resume(
    cluster_env, tmp_path, monkeypatch, isolated_runs, user_home, capsys
):
    """The same sweep on real Slurm with the record site init wrote: one array, each variant
    by its own record; --resume reruns only the failed one; $HOME stays empty."""
    records = tmp_path / "records"
    monkeypatch.setenv("HPCPROF_SYSTEMS_DIR", str(records))
    assert main(["site", "init", "--scheduler", "slurm", "--name", "slurmlake"]) == 0
    common = ["sweep", "--system", "slurmlake", "--backend", "slurm", "--ranks-per-node", "1",
              "--walltime", "00:05:00", "--binding", "none"]  # fmt: skip
    assert main([*common, "--vary=--code=0,2,0", "--wait", *EXIT_AS_TOLD]) in (0, 1)
    capsys.readouterr()
    sweep_dir = next(Path(os.environ["HPCPROF_RUNS_DIR"]).rglob("sweep.json")).parent
    sweep = Sweep.load(sweep_dir)
    assert sweep.refresh() == {0: "COMPLETED", 1: "FAILED", 2: "COMPLETED"}
    first = [e["run_dir"] for e in sweep.record()["variants"]]
    codes = [RunDir(sweep.path / r).manifest().get("exit_code") for r in first]
    assert codes == [0, 2, 0]

    assert main(["sweep", "--resume", str(sweep_dir), "--backend", "slurm", "--wait"]) in (0, 1)
    again = Sweep.load(sweep_dir)
    rerun = again.record()["variants"]
    assert [e["run_dir"] for e in rerun][0::2] == first[0::2]  # 0 and 2 kept as they were
    assert rerun[1]["run_dir"] != first[1] and rerun[1]["earlier_runs"] == [first[1]]
    assert again.refresh() == {0: "COMPLETED", 1: "FAILED", 2: "COMPLETED"}
    assert list(user_home.iterdir()) == []


@pytest.mark.slurm
def test_site_init_on_real_slurm_then_a_two_rank_job_finds_the_record(
    cluster_env, tmp_path, monkeypatch, isolated_runs, user_home, capsys
):
    """A 2-rank job with the record site init wrote, on real Slurm through srun's PMI-2: each
    rank sees the record's folder, which the batch script exported; $HOME stays empty."""
    records = tmp_path / "records"
    monkeypatch.setenv("HPCPROF_SYSTEMS_DIR", str(records))
    assert main(["site", "init", "--scheduler", "slurm", "--name", "slurmlake"]) == 0
    capsys.readouterr()
    spec = JobSpec(system="slurmlake", ranks_per_node=2, walltime="00:05:00", binding="none",
                   command=["python3", "-c", PROBE])  # fmt: skip
    job = submit(spec, backend="slurm")
    assert job.wait(timeout=180, progress=False) == "COMPLETED", job.tail()
    assert sorted(job.tail().splitlines()) == [f"{r} {records}" for r in (0, 1)]
    script = (Path(job.run_dir) / "job.sh").read_text()
    assert f"export HPCPROF_SYSTEMS_DIR={records}\n" in script
    assert "srun" in script and "#SBATCH" in script and "#PBS" not in script
    assert list(user_home.iterdir()) == []
