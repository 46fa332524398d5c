"""The rehearsal's PBS twin behaves as a real OpenPBS server did (issue #25;
../shared/reference/openpbs/README.md): the walltime kill (SIGTERM, the job's trap writes its
record, then SIGKILL after the grace period; PBS's stderr line; Exit_status -29), a qdel from
outside the kit (Exit_status 271, "terminated by USER@HOST"), qsub's exit codes, history off,
the job's environment and umask. A real PBS server cannot be installed here: this is the twin.
"""

from __future__ import annotations

import json
import os
import subprocess
import warnings
from pathlib import Path

import pytest

from hpcprof_kit.cli import main as cli_main
from hpcprof_kit.jobs import Job, JobSpec
from hpcprof_kit.jobs.backends.pbs import PbsBackend, attributes
from hpcprof_kit.jobs.rundir import RunDir
from hpcprof_kit.rehearsal import twin as twin_mod
from hpcprof_kit.systems import load_system

from gates import Gate
from slurm_cluster import _until  # the tests' one poll of an answer until it is reached

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(300)]


@pytest.fixture
def twin(tmp_path, monkeypatch):
    t = twin_mod.build(tmp_path / "twin", load_system("aurora"), kill_grace_s=1.0,
                       reservations={"R1": {"nodes": 1, "walltime": "01:00:00"}})  # fmt: skip
    monkeypatch.setenv("PATH", f"{t.bin}{os.pathsep}{os.environ['PATH']}")
    return t


def job_script(twin, run_dir: Path, command: tuple[str, ...], walltime: str = "00:05:00") -> Path:
    """The kit's own Aurora script (its EXIT and TERM traps) for ``command``, in queue R1."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # R1 is a reservation the kit does not know
        spec = JobSpec(system="aurora", command=command, queue="R1", account="P",
                       ranks_per_node=1, walltime="00:05:00", venv=str(twin.kit_venv))  # fmt: skip
        text = spec.render()
    assert "#PBS -l walltime=00:05:00" in text
    text = text.replace("#PBS -l walltime=00:05:00", f"#PBS -l walltime={walltime}")
    text = text.replace('"${HPCPROF_RUN_DIR:-', f'"${{HPCPROF_RUN_DIR:-{run_dir}}}" #')
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "job.sh").write_text(text)
    return run_dir / "job.sh"


def qsub(twin, run_dir: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["qsub", "-o", str(run_dir / "stdout"), "-e", str(run_dir / "stderr"), *extra, "job.sh"],
        cwd=run_dir, env=twin.login_env(), capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def handle(run_dir: Path, job_id: str) -> Job:
    run = RunDir(run_dir)
    run.update(state="QUEUED", job_id=job_id, backend="pbs", walltime_s=60)
    return Job(run, PbsBackend(), job_id)


def test_the_walltime_kill_lets_the_trap_write_its_record_then_ends_at_minus_29(twin, tmp_path):
    run_dir = tmp_path / "wall"
    job_script(twin, run_dir, ("sleep", "60"), walltime="00:00:02")
    done = qsub(twin, run_dir)
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.strip()
    assert handle(run_dir, job_id).wait(timeout=120, progress=False) == "TIMEOUT"
    record = json.loads((run_dir / "job_end.json").read_text())
    assert (record["exit_code"], record["signal"]) == (143, 15)  # the trap ran on SIGTERM
    assert "=>> PBS: job killed: walltime 3 exceeded limit 2" in (run_dir / "stderr").read_text()
    attrs = attributes(job_id)
    assert attrs["Exit_status"] == "-29" and attrs["comment"].endswith(
        "and exceeded resource walltime"
    )
    assert oct((run_dir / "job_end.json").stat().st_mode & 0o777) == "0o600"  # umask 0077


def test_a_qdel_from_outside_the_kit_ends_at_271_terminated_by_the_user(twin, tmp_path):
    run_dir = tmp_path / "del"
    gate = tmp_path / "started.fifo"
    os.mkfifo(gate)
    job_script(twin, run_dir, ("bash", "-c", f"echo up > {gate}; sleep 60"))
    job_id = qsub(twin, run_dir).stdout.strip()
    with gate.open() as fifo:  # blocks until the job runs its command
        assert fifo.read().strip() == "up"
    deleted = subprocess.run(["qdel", job_id], env=twin.login_env(), capture_output=True,
                             text=True, timeout=60)  # fmt: skip
    assert deleted.returncode == 0, deleted.stderr
    job = handle(run_dir, job_id)
    assert job.wait(timeout=120, progress=False) == "CANCELLED"
    attrs = attributes(job_id)
    user = twin.config["user"]
    assert attrs["Exit_status"] == "271" and attrs["substate"] == "91"
    assert attrs["comment"].endswith(f"and terminated by {user}@login-twin")
    assert f"deleted by {user}@login-twin (qdel)" in job.manifest["note"]
    assert json.loads((run_dir / "job_end.json").read_text())["signal"] == 15
    again = subprocess.run(["qdel", job_id], env=twin.login_env(), capture_output=True,
                           text=True, timeout=60)  # fmt: skip
    assert (again.returncode, again.stderr.strip()) == (35, f"qdel: Job has finished {job_id}")
    plain = subprocess.run(["qstat", "-f", job_id], env=twin.login_env(), capture_output=True,
                           text=True, timeout=60)  # fmt: skip
    assert plain.returncode == 35 and "Job has finished, use -x" in plain.stderr


@pytest.mark.parametrize(
    ("old", "new", "code"),
    [
        ("#PBS -q R1", "#PBS -q nosuch", 170),
        ("select=1", "select=9", 188),
        ("select=1", "select=0", 187),
        ("#PBS -l walltime=", "#PBS -l gpus=2\n#PBS -l walltime=", 166),
    ],
)
def test_qsub_refuses_with_the_servers_exit_codes(twin, tmp_path, old, new, code):
    run_dir = tmp_path / "r"
    script = job_script(twin, run_dir, ("true",))
    text = script.read_text()
    assert old in text
    script.write_text(text.replace(old, new, 1))
    done = qsub(twin, run_dir)
    assert done.returncode == code, done.stderr


def test_without_history_the_kit_still_follows_the_job_to_its_end(tmp_path, monkeypatch):
    t = twin_mod.build(tmp_path / "twin", load_system("aurora"), job_history=False,
                       reservations={"R1": {"nodes": 1, "walltime": "01:00:00"}})  # fmt: skip
    monkeypatch.setenv("PATH", f"{t.bin}{os.pathsep}{os.environ['PATH']}")
    run_dir = tmp_path / "h"
    shown = "umask; env | grep -E '^(NCPUS|OMP_NUM_THREADS|PBS_JOBDIR)='"
    job_script(t, run_dir, ("bash", "-c", shown))
    job_id = qsub(t, run_dir).stdout.strip()
    job = handle(run_dir, job_id)
    assert job.wait(timeout=120, progress=False) == "COMPLETED"
    assert attributes(job_id) is None  # the server forgot it: the record decided
    out = (run_dir / "stdout").read_text()
    # PBS gives the job NCPUS=1 and OMP_NUM_THREADS=1; the kit's script sets the threads
    # from the binding plan (4 cores a rank on Aurora)
    assert "0077" in out and "NCPUS=1" in out and "OMP_NUM_THREADS=4" in out
    log = [json.loads(line) for line in t.log_path.read_text().splitlines()]
    (start,) = [e for e in log if e["event"] == "job_start"]
    assert {"NCPUS", "OMP_NUM_THREADS", "PBS_JOBDIR", "PBS_NODENUM", "TMPDIR"} <= set(start["env"])


def test_a_job_array_runs_each_index_with_its_own_id_and_files(twin, tmp_path):
    """qsub -J as a real OpenPBS ran it: ids N[], N[i]; PBS_ARRAY_INDEX per subjob; output
    files <name>.o<seq>.<i> with -k doe; the parent ends with the last subjob's verdict."""
    run_dir = tmp_path / "arr"
    record = 'echo "$PBS_ARRAY_INDEX $PBS_ARRAY_ID $PBS_JOBID" > "index-$PBS_ARRAY_INDEX.txt"'
    script = job_script(twin, run_dir, ("bash", "-c", f"cd {run_dir}; {record}"))
    text = script.read_text().replace("#PBS -k doe\n", "#PBS -k doe\n#PBS -J 0-4:2\n")
    script.write_text(text)
    done = subprocess.run(["qsub", "job.sh"], cwd=run_dir, env=twin.login_env(),
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    parent = done.stdout.strip()
    seq, server = parent.split("[]")[0], parent.split(".", 1)[1]
    assert parent == f"{seq}[].{server}"
    assert handle(run_dir, parent).wait(timeout=180, progress=False) == "COMPLETED"
    for i in (0, 2, 4):
        line = (run_dir / f"index-{i}.txt").read_text().split()
        assert line == [str(i), parent, f"{seq}[{i}].{server}"]
        assert attributes(f"{seq}[{i}].{server}")["Exit_status"] == "0"
        assert (run_dir / f"hpcprof-local.o{seq}.{i}").exists() or list(
            run_dir.glob(f"*.o{seq}.{i}")
        )
    assert not (run_dir / "index-1.txt").exists()
    attrs = attributes(parent)
    assert attrs["array"] == "True" and attrs["array_indices_remaining"] == "-"
    gone = subprocess.run(["qstat", "-x", "-f", f"{seq}.{server}"], env=twin.login_env(),
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert gone.returncode == 153  # plain N is no job: the array is N[]


@pytest.mark.parametrize(
    ("value", "queue", "code", "message"),
    [
        ("3", "R1", 2, "qsub: illegal -J value"),
        ("5-3", "R1", 2, "qsub: illegal -J value"),
        ("0-10000", "R1", 3, "qsub: Array job exceeds server or queue size limit"),
        ("0-1", "debug", 38, "qsub: would exceed queue generic's per-user limit"),
    ],
)
def test_job_arrays_are_refused_as_pbs_refuses_them(twin, tmp_path, value, queue, code, message):
    run_dir = tmp_path / "bad"
    script = job_script(twin, run_dir, ("true",))
    text = script.read_text().replace("#PBS -q R1", f"#PBS -q {queue}")
    script.write_text(text.replace("#PBS -k doe\n", f"#PBS -k doe\n#PBS -J {value}\n"))
    done = qsub(twin, run_dir)
    assert (done.returncode, done.stderr.strip()) == (code, message)


@pytest.fixture
def forgetful(tmp_path, monkeypatch):
    """A twin whose server keeps no job history (OpenPBS's default)."""
    t = twin_mod.build(tmp_path / "twin", load_system("aurora"), kill_grace_s=1.0,
                       job_history=False,
                       reservations={"R1": {"nodes": 1, "walltime": "01:00:00"}})  # fmt: skip
    monkeypatch.setenv("PATH", f"{t.bin}{os.pathsep}{os.environ['PATH']}")
    return t


def test_history_off_a_walltime_overrun_is_timeout_by_pbs_stderr_line(forgetful, tmp_path):
    run_dir = tmp_path / "wall"
    job_script(forgetful, run_dir, ("sleep", "60"), walltime="00:00:02")
    job_id = qsub(forgetful, run_dir).stdout.strip()
    job = handle(run_dir, job_id)
    assert job.wait(timeout=120, progress=False) == "TIMEOUT"
    assert attributes(job_id) is None  # forgotten: only PBS's line in stderr says why
    assert job.manifest["note"] == (
        "PBS's walltime: its stderr says '=>> PBS: job killed: walltime 3 exceeded limit 2'"
    )


@pytest.mark.parametrize("by_kit", [False, True], ids=["outside-qdel", "kit-cancel"])
def test_history_off_qdel_of_a_running_job_claims_only_what_is_known(forgetful, tmp_path, by_kit):
    """cases.md rows 18 and 19: the kit's own accepted qdel is a cancel; another's qdel leaves
    the record a program's own exit 143 leaves (row 9), and PBS forgot the job: FAILED 143,
    its possible causes named."""
    run_dir = tmp_path / "del"
    gate = tmp_path / "started.fifo"
    os.mkfifo(gate)
    job_script(forgetful, run_dir, ("bash", "-c", f"echo up > {gate}; sleep 60"))
    job_id = qsub(forgetful, run_dir).stdout.strip()
    with gate.open() as fifo:  # blocks until the job runs its command
        assert fifo.read().strip() == "up"
    job = handle(run_dir, job_id)
    if by_kit:
        assert job.cancel() in ("RUNNING", "CANCELLED")  # the kill takes its grace period
    else:
        deleted = subprocess.run(["qdel", job_id], env=forgetful.login_env(),
                                 capture_output=True, text=True, timeout=60)  # fmt: skip
        assert deleted.returncode == 0, deleted.stderr
    assert job.wait(timeout=120, progress=False) == ("CANCELLED" if by_kit else "FAILED")
    assert job.exit_code == 143 and attributes(job_id) is None
    assert job.manifest["note"] == (
        "cancelled by the kit (qdel); job_end.json: killed by signal 15 (SIGTERM)" if by_kit
        else "exit code 143, killed by signal 15 (SIGTERM) (job_end.json); the cause is unknown: "
        "a qdel, the walltime (but PBS wrote no walltime line) or the program itself exiting "
        "143 all leave this record, and PBS kept no record of the job (no job history) to tell "
        "which"
    )  # fmt: skip


@pytest.mark.parametrize("history", [True, False], ids=["history-on", "history-off"])
def test_twin_server_down_a_refused_cancel_is_no_cancel_and_the_job_completes(
    tmp_path, monkeypatch, capsys, history
):
    """cases.md rows 53 and 54: with the server down ``qdel`` fails (exit 162, "Connection
    refused"), the job runs on and finishes 0; the server then says F, Exit_status 0 (history
    on) or has forgotten it (off). The kit must say COMPLETED, never "cancelled by the kit"."""
    twin = twin_mod.build(tmp_path / "twin", load_system("aurora"), kill_grace_s=1.0,
                          job_history=history,
                          reservations={"R1": {"nodes": 1, "walltime": "01:00:00"}})  # fmt: skip
    monkeypatch.setenv("PATH", f"{twin.bin}{os.pathsep}{os.environ['PATH']}")
    run_dir = tmp_path / "run"
    gate = Gate(tmp_path)
    job_script(twin, run_dir, tuple(gate.command("exit 0")))
    job_id = qsub(twin, run_dir).stdout.strip()
    job = handle(run_dir, job_id)
    gate.wait_started()
    assert job.refresh() == "RUNNING"
    twin.set_server_down(True)
    assert cli_main(["cancel", str(run_dir)]) == 2
    err = capsys.readouterr().err
    refused = ("qdel said: Connection refused; qdel: cannot connect to server "
               "aurora-pbs-twin (errno=15010) (exit 162)")  # fmt: skip
    assert refused in err and "The job was not cancelled: it runs on" in err
    cancel = RunDir(run_dir).manifest()["cancel"]
    assert (cancel["command"], cancel["exit_code"], cancel["accepted"]) == (
        f"qdel {job_id}", 162, False)  # fmt: skip
    assert cancel["text"] == f"cancel asked at {cancel['asked_at']}; {refused}"
    gate.release()
    appeared, _ = _until((run_dir / "job_end.json").exists, bool, 120, interval=0.05)
    assert appeared, "the job never wrote its record"
    assert job.refresh() == "RUNNING"  # the server is silent: the last known state stays
    twin.set_server_down(False)
    assert job.wait(timeout=120, progress=False) == "COMPLETED"
    assert job.exit_code == 0
    if history:  # the server's own record agrees (README: no comment after the restart)
        attrs = attributes(job_id)
        assert (attrs["job_state"], attrs["Exit_status"], attrs["substate"]) == ("F", "0", "92")
        assert "comment" not in attrs
    assert cli_main(["status", str(run_dir)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"COMPLETED  job {job_id}  exit code 0"
    assert f"cancel asked at {cancel['asked_at']}; {refused}" in out
    assert "cancelled by the kit" not in job.manifest.get("note", "")
