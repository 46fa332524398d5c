"""An Aurora sweep as one PBS Pro job array under the rehearsal's PBS twin (issue #24; a real
PBS Pro cannot be installed here): ``#PBS -J``, one subjob per variant picked by
``PBS_ARRAY_INDEX``, each writing its own run directory, as the twin runs arrays the way a
real OpenPBS server ran them (../shared/reference/openpbs/README.md).

Issue #36's PBS cases under the same twin: a one-job-per-user queue running the variants in
turn (a failing middle variant, a walltime kill, a cancel before a turn), and every deletion
of an array's subjobs, with job history on and off."""

from __future__ import annotations

import json
import os
import re
import subprocess
import warnings

import pytest

from hpcprof_kit.cli import main as cli_main
from hpcprof_kit.jobs import Job, JobSpec, RunDir, sweep_array
from hpcprof_kit.jobs.backends.pbs import attributes
from hpcprof_kit.jobs.sweep import Sweep
from hpcprof_kit.rehearsal import twin as twin_mod
from hpcprof_kit.systems import load_system

from slurm_cluster import _until  # the tests' one poll of an answer until it is reached

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(600)]


def test_an_aurora_sweep_runs_as_one_pbs_array_under_the_twin(tmp_path, monkeypatch, isolated_runs):
    twin = twin_mod.build(tmp_path / "twin", load_system("aurora"),
                          reservations={"R1": {"nodes": 1, "walltime": "01:00:00"}})  # fmt: skip
    monkeypatch.setenv("PATH", f"{twin.bin}{os.pathsep}{os.environ['PATH']}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # R1 is a reservation the kit's record does not list
        base = JobSpec(system="aurora", example="affinity", queue="R1", account="P",
                       venv=str(twin.kit_venv))  # fmt: skip
        sweep = base.sweep(ranks_per_node=[1, 2])
        sweep.run(backend="pbs", wait=True)
    record = json.loads((sweep.path / "sweep.json").read_text())
    states = [v["state"] for v in record["variants"]]
    assert states == ["COMPLETED", "COMPLETED"], record
    script = next(sweep.path.glob("array*.sh")).read_text()
    assert "#PBS -J 0-1\n" in script and 'case "${PBS_ARRAY_INDEX:?' in script
    ids = [v["job_id"] for v in record["variants"]]
    parent = ids[0].replace("[0]", "[]")
    assert ids == [parent.replace("[]", "[0]"), parent.replace("[]", "[1]")]
    for v, ranks in zip(record["variants"], (1, 2), strict=True):
        run = sweep.path / v["run_dir"]
        assert json.loads((run / "job_end.json").read_text())["exit_code"] == 0
        spec = json.loads((run / "spec.json").read_text())
        assert spec["ranks_per_node"] == ranks
    # the twin ran each subjob with its own index
    events = [json.loads(line) for line in twin.log_path.read_text().splitlines()]
    started = [e["job_id"] for e in events if e["event"] == "job_start"]
    assert started == ids


# ---- the PBS cases under the twin (issue #36) -------------------------------------
# Each variant runs `bash -c SCRIPT v --code WORD`: WORD is its exit code, or `wait` (it ends 0
# once the test's gate file exists) or `sleep` (it outlives the walltime).
SCRIPT = (
    'if [ "$2" = wait ]; then until [ -e {gate} ]; do sleep 0.1; done; exit 0; fi; '
    'if [ "$2" = sleep ]; then sleep 60; fi; exit "$2"'
)


def twin_for(tmp_path, monkeypatch, history: bool = True):
    twin = twin_mod.build(tmp_path / "twin", load_system("aurora"), kill_grace_s=1.0,
                          job_history=history,
                          reservations={"R1": {"nodes": 1, "walltime": "01:00:00"}})  # fmt: skip
    monkeypatch.setenv("PATH", f"{twin.bin}{os.pathsep}{os.environ['PATH']}")
    return twin


def words_sweep(twin, tmp_path, queue: str, words: list[str]):
    """An Aurora sweep whose variants end as ``words`` say (see SCRIPT)."""
    gate = tmp_path / "gate"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # R1 is a reservation the kit's record does not list
        base = JobSpec(system="aurora", queue=queue, account="P", ranks_per_node=1,
                       walltime="00:05:00", venv=str(twin.kit_venv),
                       command=("bash", "-c", SCRIPT.format(gate=gate), "v"))  # fmt: skip
        return base.sweep(**{"--code": words}), gate


def until(path, timeout: float = 120.0) -> None:
    """Gate on a file the job writes (its stdout, its record)."""
    appeared, _ = _until(path.exists, bool, timeout, interval=0.05)
    assert appeared, f"{path} never appeared"


def runs_of(sweep) -> list:
    return [sweep.path / e["run_dir"] for e in sweep.record()["variants"]]


def codes_of(sweep) -> list:
    return [RunDir(r).manifest().get("exit_code") for r in runs_of(sweep)]


def test_twin_in_turn_the_middle_variant_fails_alone_and_resume_reruns_only_it(
    tmp_path, monkeypatch, isolated_runs
):
    twin = twin_for(tmp_path, monkeypatch)
    sweep, _ = words_sweep(twin, tmp_path, "debug", ["0", "2", "0"])  # one job per user
    sweep.run(backend="pbs", wait=True)
    assert "for run_dir in" in (sweep.path / "array.sh").read_text()
    assert sweep.refresh() == {0: "COMPLETED", 1: "FAILED", 2: "COMPLETED"}
    assert codes_of(sweep) == [0, 2, 0]
    first = [e["run_dir"] for e in sweep.record()["variants"]]
    again = Sweep.load(sweep.path).run(backend="pbs", wait=True)
    script = (sweep.path / "array-1.sh").read_text()
    rerun = again.record()["variants"]
    assert [e["run_dir"] for e in rerun][0::2] == first[0::2]  # 0 and 2 kept as they were
    assert rerun[1]["run_dir"] != first[1] and rerun[1]["earlier_runs"] == [first[1]]
    assert script.count("bash job.sh") == 1 and rerun[1]["run_dir"] in script
    assert again.refresh() == {0: "COMPLETED", 1: "FAILED", 2: "COMPLETED"}


@pytest.mark.parametrize("history", [True, False], ids=["history-on", "history-off"])
def test_twin_in_turn_a_walltime_kill_during_variant_0_names_only_variant_0(
    tmp_path, monkeypatch, isolated_runs, history
):
    twin = twin_for(tmp_path, monkeypatch, history)
    # A queue with no 5-minute minimum, taking one job per user as debug does: reservation R1
    # with that rule (the variants then run in turn inside one job).
    rules = load_system("aurora").extra["queue_rules"]
    monkeypatch.setitem(rules, "R1", {"max_jobs_per_user": 1})
    sweep, _ = words_sweep(twin, tmp_path, "R1", ["sleep", "0", "0"])

    def cut(*args, **kwargs):  # the same job script, with a 4 s walltime for the whole job
        text = sweep_array_script(*args, **kwargs)
        return re.sub(r"#PBS -l walltime=\S+", "#PBS -l walltime=00:00:04", text)

    sweep_array_script = sweep_array.array_script
    monkeypatch.setattr(sweep_array, "array_script", cut)
    sweep.run(backend="pbs", wait=True)
    assert sweep.refresh() == {0: "TIMEOUT", 1: "NOT_STARTED", 2: "NOT_STARTED"}
    assert [(r / "job_end.json").exists() for r in runs_of(sweep)] == [True, False, False]
    if not history:  # the job is forgotten: PBS's own stderr line says it was the walltime
        assert "=>> PBS: job killed: walltime" in RunDir(runs_of(sweep)[0]).manifest()["note"]
    assert [v.index for v in sweep.pending()] == [0, 1, 2]


@pytest.mark.parametrize("history", [True, False], ids=["history-on", "history-off"])
def test_twin_array_deletions_queued_running_and_the_whole_array(
    tmp_path, monkeypatch, isolated_runs, history
):
    """Subjob 0 finishes; 1 runs; 2 and 3 are deleted while queued (2 polled while the array
    lives, 3 only after it ended); then the array is deleted: 0 keeps its COMPLETED (PBS
    rewrites it to exit 1), 1 is CANCELLED, 2, 3 and 4 never ran."""
    twin = twin_for(tmp_path, monkeypatch, history)
    sweep, gate = words_sweep(twin, tmp_path, "R1", ["0", "wait", "0", "0", "0"])
    sweep.run(backend="pbs", wait=False)
    runs = runs_of(sweep)
    until(runs[1] / "stdout")  # subjob 1 runs (subjob 0 has ended)
    parent = sweep.record()["variants"][0]["job_id"].replace("[0]", "[]")
    env = twin.login_env()

    def qdel(job_id: str) -> None:
        done = subprocess.run(["qdel", job_id], env=env, capture_output=True, text=True,
                              timeout=60)  # fmt: skip
        assert done.returncode == 0, done.stderr

    qdel(parent.replace("[]", "[2]"))
    assert Job.from_run_dir(runs[2]).refresh() == "NOT_STARTED"  # while the array lives
    qdel(parent.replace("[]", "[3]"))
    qdel(parent)
    ended, _ = _until(
        lambda: (attributes(parent) or {}).get("job_state", "F"),
        lambda state: state == "F",
        120,
        interval=0.05,
    )  # the array ends
    assert ended, f"{parent} never ended"
    states = sweep.wait(timeout=120)
    # history off (cases.md row 37): PBS forgot subjob 1, and its record (143 / 15) is what a
    # program's own exit 143 leaves too; but the array ended before 2, 3 and 4 ever started,
    # which only its deletion does: CANCELLED, the note says why (issue #49)
    assert states == {0: "COMPLETED", 1: "CANCELLED", 2: "NOT_STARTED", 3: "NOT_STARTED",
                      4: "NOT_STARTED"}  # fmt: skip
    if not history:
        note = RunDir(runs[1]).manifest()["note"]
        assert note.startswith("deleted (qdel) with its array while it ran: ")
        assert "the array ended before variants 2, 3, 4 ever started" in note
    codes = codes_of(sweep)  # a deleted running subjob: 143 on some real runs, 271 on others
    assert codes[0] == 0 and codes[1] in (143, 271) and codes[2:] == [None, None, None]
    record = json.loads((runs[1] / "job_end.json").read_text())
    assert (record["exit_code"], record["signal"]) == (143, 15)
    assert not gate.exists() and not any((r / "stdout").exists() for r in runs[2:])
    assert [v.index for v in sweep.pending()] == [1, 2, 3, 4]


def test_twin_cancel_of_a_not_yet_started_in_turn_variant_skips_it_alone(
    tmp_path, monkeypatch, isolated_runs, capsys
):
    twin = twin_for(tmp_path, monkeypatch)
    sweep, gate = words_sweep(twin, tmp_path, "debug", ["wait", "0", "0"])
    sweep.run(backend="pbs", wait=False)
    runs = runs_of(sweep)
    until(runs[0] / "stdout")  # variant 0's turn has come
    assert cli_main(["cancel", str(runs[0])]) == 2  # the running one: refused, nothing deleted
    said = capsys.readouterr().err
    assert "pass --all" in said and "skip 2 variant(s) not begun" in said
    assert cli_main(["cancel", str(runs[2])]) == 0
    assert capsys.readouterr().out.strip() == "CANCELLED"
    gate.touch()
    assert sweep.wait(timeout=120) == {0: "COMPLETED", 1: "COMPLETED", 2: "CANCELLED"}
    assert not (runs[2] / "stdout").exists() and not (runs[2] / "job_end.json").exists()
    assert [e["event"] for e in twin.events() if e["event"] == "qdel"] == []
