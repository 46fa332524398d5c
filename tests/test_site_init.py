"""``hpcprof-kit site init``: a site record written from what a PBS or Slurm cluster says.

PBS: the fixtures in tests/fixtures/pbs/site/ are OpenPBS 23.06's ``qstat -Qf``, ``pbsnodes -av``,
``qmgr -c 'p s'`` and ``qstat -Bf`` for the server the OpenPBS reference describes (workq by
default, ALCF-like debug queues with one queued job per user, a job-wide ``filesystems`` and a
host-level ``system`` resource, history on), plus a queue with three queued jobs per user and
its own array limit. A PBS server cannot run here: the CLI test reads them through stand-in
commands (named so). Slurm: the real test cluster (tests/slurm_cluster.py).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hpcprof_kit.cli import main
from hpcprof_kit.errors import SpecError
from hpcprof_kit.jobs import JobSpec, submit
from hpcprof_kit.systems import load_system
from hpcprof_kit.systems import site_facts as sf
from hpcprof_kit.systems.site_init import read_cluster, record_text

FIXTURES = Path(__file__).parent / "fixtures" / "pbs" / "site"
ANSWERS = {
    ("qstat", "-Qf"): "qstat_Qf.txt",
    ("pbsnodes", "-av"): "pbsnodes_av.txt",
    ("qmgr", "-c", "p s"): "qmgr_p_s.txt",
    ("qstat", "-Bf"): "qstat_Bf.txt",
}


def pbs_answers(argv, without=()) -> str | None:
    name = ANSWERS.get(tuple(argv))
    return None if name is None or name in without else (FIXTURES / name).read_text()


# ---- the parsers, on the server's own text ---------------------------------------------------
def test_qstat_Qf_gives_the_execution_queues_their_limits_and_max_queued():
    queues = {q.name: q for q in sf.parse_pbs_queues((FIXTURES / "qstat_Qf.txt").read_text())}
    assert list(queues) == ["workq", "debug", "debug-scaling", "generic"]  # prod routes only
    assert queues["workq"] == sf.QueueFacts("workq")  # no limits set: none invented
    debug = queues["debug"]
    assert (debug.min_nodes, debug.max_nodes, debug.max_walltime, debug.min_walltime) == (
        1, 2, "01:00:00", "00:05:00",
    )  # fmt: skip
    assert debug.max_queued_per_user == 1
    assert queues["debug-scaling"].min_nodes == 2
    generic = queues["generic"]
    assert (generic.max_queued_per_user, generic.max_array_size, generic.open) == (3, 100, False)
    assert generic.enabled  # enabled = True, started = False: qsub takes jobs, none run yet


def test_pbsnodes_and_the_server_print_give_cores_resources_and_history():
    nodes = sf.parse_pbsnodes((FIXTURES / "pbsnodes_av.txt").read_text())
    assert nodes == [sf.NodeFacts("pbshost", cores=2, gpus=0, state="free")]
    server = sf.parse_qmgr_server((FIXTURES / "qmgr_p_s.txt").read_text())
    assert server.resources == ("filesystems", "system")
    assert (server.default_queue, server.job_history, server.max_array_size) == (
        "workq", True, 10000,
    )  # fmt: skip
    # qstat -Bf of a server that never turned history on (OpenPBS's default) lists no
    # job_history_enable: history is off.
    plain = sf.parse_pbs_server((FIXTURES / "qstat_Bf.txt").read_text())
    assert (plain.name, plain.default_queue, plain.job_history) == ("pbshost", "workq", False)


# ---- the record ------------------------------------------------------------------------------
@pytest.fixture
def records(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "records"
    monkeypatch.setenv("HPCPROF_SYSTEMS_DIR", str(folder))
    return folder


def test_the_pbs_record_loads_with_the_servers_queues_and_rules(records):
    records.mkdir()
    facts = read_cluster("pbs", pbs_answers)
    (records / "pbshost.toml").write_text(record_text(facts, "pbshost"))
    rec = load_system("pbshost")
    assert (rec.scheduler, rec.launcher, rec.default_queue) == ("pbs", "hydra", "workq")
    assert [(q.name, q.min_nodes, q.max_nodes, q.max_walltime) for q in rec.queues.values()] == [
        ("workq", 1, 1, "999:59:59"),  # no limit on the server; one node in pbsnodes
        ("debug", 1, 2, "01:00:00"),
        ("debug-scaling", 2, 256, "01:00:00"),
        ("generic", 1, 1, "00:30:00"),
    ]
    assert rec.extra["queue_rules"] == {
        "max_array_size": 10000,
        "debug": {"max_jobs_per_user": 1},
        "debug-scaling": {"max_jobs_per_user": 1},
        # an array counts as N queued jobs: 3 per user caps it at 3 variants
        "generic": {"max_jobs_per_user": 3, "max_array_size": 3},
    }
    assert "min_walltime" not in rec.extra["queue_rules"]  # ALCF's rule, not this server's
    assert (rec.account_required, rec.default_filesystems, rec.env_vars) == (False, "", {})
    assert "launcher_args" not in rec.extra  # no PALS flags
    assert rec.extra["cluster"] == {
        "nodes": 1, "cores_per_node": 2, "gpus_per_node": 0,
        "resources": ["filesystems", "system"], "job_history": True,
    }  # fmt: skip
    assert rec.folder == str(records.resolve())


def test_a_generic_pbs_record_renders_a_clean_script_that_names_its_folder(records):
    records.mkdir()
    facts = read_cluster("pbs", lambda argv: pbs_answers(argv, without={"qmgr_p_s.txt"}))
    (records / "lake.toml").write_text(record_text(facts, "lake"))
    spec = JobSpec(system="lake", ranks_per_node=2, command=["hostname"], walltime="00:01:00")
    script = spec.render()
    pbs_lines = [line for line in script.splitlines() if line.startswith("#PBS")]
    assert pbs_lines == [
        f"#PBS -N {spec.job_name}",
        "#PBS -q workq",
        "#PBS -l select=1:ncpus=2",
        "#PBS -l walltime=00:01:00",
    ]  # no -A, no -l filesystems, no place: nothing ALCF-only
    assert "--pmi" not in script and "CCL_" not in script
    assert f"export HPCPROF_SYSTEMS_DIR={shlex.quote(str(records.resolve()))}\n" in script
    assert "job_history = false" in (records / "lake.toml").read_text()  # qstat -Bf says none
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        from must_have import missing

        missing("shellcheck is not on PATH (Debian's shellcheck)")
    (records / "job.sh").write_text(script)
    done = subprocess.run([shellcheck, "-s", "bash", str(records / "job.sh")],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0, done.stdout
    # the built-in records' scripts are as before: no folder to name
    assert "HPCPROF_SYSTEMS_DIR" not in JobSpec(system="polaris", account="P").render()


def test_the_script_finds_its_record_in_a_job_that_inherits_no_variables(records, tmp_path):
    """The rendered PBS script run as PBS's mom runs it: a login shell with none of the
    submitting shell's variables (the OpenPBS reference). Its two Hydra ranks load the record."""
    records.mkdir()
    facts = read_cluster("pbs", pbs_answers)
    (records / "lake.toml").write_text(record_text(facts, "lake"))
    probe = (
        "import os; from hpcprof_kit.systems import load_system; "
        "os.write(1, (load_system(os.environ['HPCPROF_SYSTEM']).name + '\\n').encode())"
    )
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    spec = JobSpec(system="lake", ranks_per_node=2, command=[sys.executable, "-c", probe])
    (run_dir / "job.sh").write_text(spec.render())
    clean = {
        "HOME": str(tmp_path),
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        "HPCPROF_RUN_DIR": str(run_dir),
    }
    done = subprocess.run(
        ["bash", str(run_dir / "job.sh")], env=clean, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-2:] == ["lake", "lake"]


def test_the_servers_max_queued_and_array_size_shape_a_sweep(records, tmp_path):
    """A sweep on the written record: debug's one queued job per user runs the variants in
    one job; generic's three per user cap an array at three variants (an array counts as N)."""
    from hpcprof_kit.jobs.sweep_array import array_limit, check_array_size, one_job_only

    records.mkdir()
    (records / "pbshost.toml").write_text(record_text(read_cluster("pbs", pbs_answers), "pbshost"))
    base = JobSpec(system="pbshost", example="seqpar", walltime="00:05:00")
    debug = base.with_(queue="debug").sweep(str(tmp_path / "runs"), **{"--seed": ["0", "1"]})
    assert one_job_only(debug)
    workq = base.sweep(str(tmp_path / "runs"), **{"--seed": ["0", "1"]})
    assert (one_job_only(workq), array_limit(workq)) == (False, 10000)
    grid = {"--seed": ["0", "1", "2", "3"]}
    generic = base.with_(queue="generic")
    assert array_limit(generic.sweep(str(tmp_path / "runs"), **{"--seed": ["0"]})) == 3
    with pytest.raises(SpecError, match="more than pbshost's array limit of 3"):
        check_array_size(generic.sweep(str(tmp_path / "runs"), **grid))


# ---- the command -----------------------------------------------------------------------------
@pytest.fixture
def pbs_standin(tmp_path, monkeypatch) -> Path:
    """qstat, pbsnodes and qmgr stand-ins that print the server's answers (no PBS here)."""
    bin_dir = tmp_path / "pbs-standin-bin"
    bin_dir.mkdir()
    cases = {
        "qstat": {"-Qf": "qstat_Qf.txt", "-Bf": "qstat_Bf.txt"},
        "pbsnodes": {"-av": "pbsnodes_av.txt"},
    }
    for command, answers in cases.items():
        body = "".join(
            f'[ "$1" = {flag} ] && exec cat {FIXTURES / name}\n' for flag, name in answers.items()
        )
        (bin_dir / command).write_text(f"#!/bin/bash\n{body}exit 2\n")
        (bin_dir / command).chmod(0o755)
    # qmgr refuses a user who may not print the server, as some sites set it
    (bin_dir / "qmgr").write_text("#!/bin/bash\necho 'qmgr: Unauthorized Request' >&2\nexit 1\n")
    (bin_dir / "qmgr").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return bin_dir


def test_site_init_pbs_writes_the_record_once_and_never_over_it_standin(
    pbs_standin, records, capsys
):
    assert main(["site", "init", "--scheduler", "pbs"]) == 0
    path = records / "pbshost.toml"  # the server's name
    assert f"wrote {path} (4 queues, 1 node)" in capsys.readouterr().out
    text = path.read_text()
    assert "#   qstat -Qf, pbsnodes -av, qstat -Bf\n" in text  # what answered; qmgr did not
    assert (
        'max_nodes = 2\n# the server refuses walltimes under 00:05:00 here\nmax_walltime = "01:00:00"'
        in text
    )
    assert "job_history = false" in text
    assert text.count("# EDIT:") == 4  # launcher, account, venv, setup: what no scheduler tells
    assert load_system("pbshost").queue("debug").max_walltime == "01:00:00"
    path.write_text(text + "# my edits\n")
    assert main(["site", "init", "--scheduler", "pbs"]) == 2
    err = capsys.readouterr().err
    assert f"{path} already exists; site init never overwrites a record" in err
    assert "pass another --name" in err
    assert path.read_text().endswith("# my edits\n")


def test_site_init_refuses_a_built_in_name_and_a_missing_folder(
    pbs_standin, records, capsys, monkeypatch
):
    assert main(["site", "init", "--scheduler", "pbs", "--name", "aurora"]) == 2
    assert "a system named 'aurora' already exists" in capsys.readouterr().err
    monkeypatch.delenv("HPCPROF_SYSTEMS_DIR")
    assert main(["site", "init", "--scheduler", "pbs"]) == 2
    assert "pass --out DIR, or set HPCPROF_SYSTEMS_DIR" in capsys.readouterr().err


def test_site_init_says_which_command_gave_no_answer(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no scheduler commands at all
    assert main(["site", "init", "--scheduler", "slurm", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "scontrol show partition, sinfo gave no answer" in err
    assert "run site init on a login node of the Slurm cluster" in err


# ---- real Slurm ------------------------------------------------------------------------------
@pytest.mark.slurm
def test_site_init_on_real_slurm_then_a_two_rank_job(cluster_env, records, capsys):
    assert main(["site", "init", "--scheduler", "slurm"]) == 0
    rec = load_system("hpcproftest")  # the cluster's ClusterName
    cpus = os.cpu_count() or 1
    assert (rec.scheduler, rec.launcher, rec.default_queue) == ("slurm", "srun", "debug")
    assert list(rec.queues) == ["debug"]
    debug = rec.queues["debug"]
    assert (debug.min_nodes, debug.max_nodes, debug.max_walltime) == (1, 1, "999:59:59")
    assert rec.extra["cluster"]["cores_per_node"] == cpus
    assert rec.extra["queue_rules"]["max_array_size"] == 1001  # Slurm's default MaxArraySize
    probe = ("import os; os.write(1, (os.environ['SLURM_PROCID'] + ' ' + "
             "os.environ['HPCPROF_SYSTEMS_DIR'] + '\\n').encode())")  # fmt: skip
    spec = JobSpec(system="hpcproftest", ranks_per_node=2, binding="none",
                   command=["python3", "-c", probe])  # fmt: skip
    job = submit(spec, backend="slurm")
    assert job.wait(timeout=60, progress=False) == "COMPLETED"
    assert sorted(job.tail().splitlines()) == [f"{r} {records.resolve()}" for r in (0, 1)]
