"""A PBS sweep on a queue whose system record does not say its limits: the server's own
``max_queued`` and ``max_array_size`` decide, read at submission (issue #36).

The parser test reads the lines a real OpenPBS 23.06 server printed (tests/fixtures/pbs/limits,
quoted from ../shared/reference/openpbs/README.md). A real PBS cannot run here, so the sweeps go
to the rehearsal twin configured as a small generic PBS cluster (a stand-in, ``build_generic``)
whose record ``site init`` wrote before the queue's limits were set: the record says nothing
of them, the server does. Its ranks are real Hydra ranks.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from hpcprof_kit.cli import main
from hpcprof_kit.errors import SpecError
from hpcprof_kit.jobs import JobSpec, RunDir
from hpcprof_kit.jobs.server_limits import read_limits
from hpcprof_kit.jobs.sweep import Sweep
from hpcprof_kit.jobs.sweep_array import array_limit, learn_server_limits, one_job_only
from hpcprof_kit.rehearsal import twin as twin_mod
from hpcprof_kit.systems import load_system
from hpcprof_kit.systems.site_facts import NodeFacts, QueueFacts, ServerFacts
from hpcprof_kit.systems.site_init import ClusterFacts, record_text

pytestmark = [pytest.mark.timeout(600)]
FIXTURES = Path(__file__).parent / "fixtures" / "pbs" / "limits"
# Each variant runs `bash -c 'exit "$2"' v --code N`: it ends with the exit code it is given.
EXIT_AS_TOLD = ["--", "bash", "-c", 'exit "$2"', "v"]
COMMON = ["sweep", "--system", "lake", "--backend", "pbs", "--ranks-per-node", "1",
          "--walltime", "00:05:00", "--binding", "none"]  # fmt: skip
UNKNOWN = (
    "hpcprof-kit sweep: warning: queue 'workq': how many queued jobs one user may have there "
    "(max_queued) and how long an array may be (max_array_size) are unknown: the system record "
    "does not say, and qstat -Qf workq did not answer here; the sweep is submitted as one "
    "array, which PBS refuses (qsub exit 38) where the queue takes fewer queued jobs per user "
    "than it has variants: then write max_jobs_per_user = 1 under [queue_rules.workq] in the "
    "record"
)


# ---- the real server's lines, parsed ---------------------------------------------------------
def real(name: str) -> str:
    return (FIXTURES / name).read_text()


def answers(queue_file: str):
    """qstat as the real server answered it: ``-Qf generic`` and ``-Bf``."""
    said = {("qstat", "-Qf", "generic"): real(queue_file), ("qstat", "-Bf"): real("qstat_Bf.txt")}
    return lambda argv: said.get(tuple(argv))


@pytest.fixture
def silent_record(tmp_path, monkeypatch) -> str:
    """A PBS record with queue 'generic' and no word of its limits (site init's shape)."""
    facts = ClusterFacts("pbs", (QueueFacts("generic"),), (NodeFacts("n1", 8),), ServerFacts())
    (tmp_path / "records").mkdir()
    (tmp_path / "records" / "pbshost.toml").write_text(record_text(facts, "pbshost"))
    monkeypatch.setenv("HPCPROF_SYSTEMS_DIR", str(tmp_path / "records"))
    assert "generic" not in load_system("pbshost").extra.get("queue_rules", {})
    return "pbshost"


def test_real_openpbs_max_queued_and_max_array_size_lines_parse():
    one = read_limits("generic", real("qstat_Qf_generic.txt"), real("qstat_Bf.txt"))
    assert (one.max_jobs_per_user, one.max_array_size) == (1, 10000)
    assert one.said == {
        "max_jobs_per_user": "the server says max_queued = [u:PBS_GENERIC=1] (qstat -Qf generic)",
        "max_array_size": "the server says max_array_size = 10000 (qstat -Bf)",
    }
    three = read_limits("generic", real("qstat_Qf_generic3.txt"), None)
    assert (three.max_jobs_per_user, three.max_array_size) == (3, None)
    assert read_limits("workq", real("qstat_Qf_generic.txt"), None) is None  # not that queue


def test_real_openpbs_one_queued_job_per_user_makes_the_sweep_one_job_in_turn(silent_record):
    sweep = JobSpec(system=silent_record, queue="generic", walltime="00:05:00").sweep(
        **{"--seed": ["0", "1", "2"]}
    )
    assert not one_job_only(sweep)  # the record alone: an array, which the server refused
    learn_server_limits(sweep, answers("qstat_Qf_generic.txt"))
    assert one_job_only(sweep)
    preview = sweep.preview("pbs")
    assert "3 variants, one PBS job running them in turn (qsub)" in preview
    assert ("# (the server says max_queued = [u:PBS_GENERIC=1] (qstat -Qf generic); the system "
            "record does not say.)\n") in preview  # fmt: skip
    assert "#PBS -J" not in preview


def test_real_openpbs_three_queued_jobs_per_user_take_an_array_of_three_not_four(silent_record):
    """As the real server did: [u:PBS_GENERIC=3] took -J 0-2 and refused -J 0-3 (exit 38)."""
    base = JobSpec(system=silent_record, queue="generic", walltime="00:05:00")
    three = base.sweep(**{"--seed": ["0", "1", "2"]})
    learn_server_limits(three, answers("qstat_Qf_generic3.txt"))
    assert (one_job_only(three), array_limit(three)) == (False, 3)
    assert "#PBS -J 0-2\n" in three.preview("pbs")
    four = base.sweep(**{"--seed": ["0", "1", "2", "3"]})
    with pytest.raises(SpecError) as err:
        learn_server_limits(four, answers("qstat_Qf_generic3.txt"))
    assert str(err.value) == (
        "the grid has 4 variants, more than pbshost's array limit of 3 (pbs: the server says "
        "max_queued = [u:PBS_GENERIC=3] (qstat -Qf generic), and PBS counts an array of N as N "
        "queued jobs); vary fewer values or split the grid into sweeps of at most 3"
    )


def test_a_queue_the_record_runs_in_turn_asks_the_server_nothing(capsys):
    """Aurora's debug queue takes one job per user (its record says so): the variants share
    one job, no array, so neither limit matters and no qstat is asked or warned about."""
    asked = []
    sweep = JobSpec(system="aurora", account="YOUR_PROJECT", queue="debug").sweep(
        **{"--epochs": ["1", "2"]}
    )
    learn_server_limits(sweep, lambda argv: asked.append(argv))
    assert asked == [] and one_job_only(sweep)
    assert "warning" not in capsys.readouterr().err


# ---- the generic PBS twin (stand-in), its record silent on the limits ------------------------
@pytest.fixture
def lake(tmp_path, monkeypatch, isolated_runs, capsys):
    """The generic PBS twin and the record site init wrote while workq had no limits; the test
    then sets the queue's limits on the server (``set_queue``), as an admin would later."""
    twin = twin_mod.build_generic(
        tmp_path / "twin", "lake", kill_grace_s=1.0,
        queues={"workq": {"max_nodes": 1, "max_walltime": "00:30:00"}},
    )  # fmt: skip
    records = tmp_path / "records"
    monkeypatch.setenv("PATH", f"{twin.bin}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("HPCPROF_SYSTEMS_DIR", str(records))
    monkeypatch.setenv("HOME", str(tmp_path / "user-home"))
    assert main(["site", "init", "--scheduler", "pbs"]) == 0
    path = records / "lake.toml"
    text = path.read_text()
    old = '# default_venv = "$HOME/venvs/hpcprof-kit"'
    path.write_text(text.replace(old, f"default_venv = {json.dumps(str(twin.kit_venv))}"))
    assert load_system("lake").extra["queue_rules"] == {"max_array_size": 10000}
    capsys.readouterr()
    return twin


def set_queue(twin, **limits) -> None:
    """The server's admin sets workq's limits (qmgr -c 'set queue workq ...')."""
    config = json.loads((twin.root / twin_mod.CONFIG).read_text())
    config["server"]["queues"]["workq"].update(limits)
    (twin.root / twin_mod.CONFIG).write_text(json.dumps(config, indent=1))


def the_sweep() -> Sweep:
    return Sweep.load(next(Path(os.environ["HPCPROF_RUNS_DIR"]).rglob("sweep.json")).parent)


@pytest.mark.mpi
def test_twin_generic_pbs_max_queued_1_not_in_the_record_runs_the_variants_in_turn(lake, capsys):
    set_queue(lake, max_queued=1)
    assert main([*COMMON, "--vary=--code=0,2,0", "--wait", *EXIT_AS_TOLD]) == 1
    said = capsys.readouterr()
    assert "warning" not in said.err and "exit 38" not in said.err
    sweep = the_sweep()
    script = (sweep.path / "array.sh").read_text()
    assert "#PBS -J" not in script and "for run_dir in" in script
    assert ("# (the server says max_queued = [u:PBS_GENERIC=1] (qstat -Qf workq); the system "
            "record does not say.)\n") in script  # fmt: skip
    assert sweep.refresh() == {0: "COMPLETED", 1: "FAILED", 2: "COMPLETED"}
    codes = [RunDir(sweep.path / e["run_dir"]).manifest()["exit_code"]
             for e in sweep.record()["variants"]]  # fmt: skip
    assert codes == [0, 2, 0]
    assert [e["ok"] for e in lake.events("qsub")] == [True]  # one job, never refused


@pytest.mark.mpi
def test_twin_generic_pbs_array_longer_than_max_array_size_is_refused_before_qsub(
    lake, capsys, tmp_path
):
    set_queue(lake, max_array_size=2)
    # the twin's server refuses such an array itself, as OpenPBS does (exit 3)
    script = tmp_path / "arr.sh"
    script.write_text("#!/bin/bash -l\n#PBS -l select=1:ncpus=2\n#PBS -l walltime=00:05:00\n"
                      "#PBS -J 0-2\ntrue\n")  # fmt: skip
    done = subprocess.run(["qsub", str(script)], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path)  # fmt: skip
    assert (done.returncode, done.stderr.strip()) == (
        3, "qsub: Array job exceeds server or queue size limit")  # fmt: skip

    assert main([*COMMON, "--vary=--code=0,1,0", "--wait", *EXIT_AS_TOLD]) == 2
    assert capsys.readouterr().err.strip() == (
        "hpcprof-kit sweep: the grid has 3 variants, more than lake's array limit of 2 (pbs: the "
        "server says max_array_size = 2 (qstat -Qf workq)); vary fewer values or split the grid "
        "into sweeps of at most 2"
    )
    assert [e["ok"] for e in lake.events("qsub")] == [False]  # only the test's own qsub above
    runs = Path(os.environ["HPCPROF_RUNS_DIR"])
    assert not runs.exists() or list(runs.iterdir()) == []  # nothing written

    assert main([*COMMON, "--vary=--code=0,0", "--wait", *EXIT_AS_TOLD]) == 0  # two fit
    sweep = the_sweep()
    assert "#PBS -J 0-1\n" in (sweep.path / "array.sh").read_text()
    assert sweep.refresh() == {0: "COMPLETED", 1: "COMPLETED"}


@pytest.mark.mpi
def test_twin_generic_pbs_unreadable_queue_says_once_the_limit_is_unknown_standin(
    lake, capsys, tmp_path, monkeypatch
):
    """A server that answers no queue query (qstat -Qf / -Bf fail; a stand-in qstat in front of
    the twin's): the sweep goes as today, one array, and one line says the limit is unknown."""
    front = tmp_path / "front"
    front.mkdir()
    (front / "qstat").write_text(
        '#!/bin/sh\ncase "$1" in -Q*|-B*) echo "qstat: Unauthorized Request" >&2; '
        f'exit 1;; esac\nexec {lake.bin / "qstat"} "$@"\n'
    )
    (front / "qstat").chmod(0o755)
    monkeypatch.setenv("PATH", f"{front}{os.pathsep}{os.environ['PATH']}")
    assert main([*COMMON, "--vary=--code=0,0", "--dry-run", *EXIT_AS_TOLD]) == 0
    assert main([*COMMON, "--vary=--code=0,0", "--wait", *EXIT_AS_TOLD]) == 0
    said = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert said == [UNKNOWN]  # said once, for the preview and the run together
    sweep = the_sweep()
    assert "#PBS -J 0-1\n" in (sweep.path / "array.sh").read_text()
    assert sweep.refresh() == {0: "COMPLETED", 1: "COMPLETED"}
