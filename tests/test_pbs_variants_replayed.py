"""Sweep variants and deletions as a real OpenPBS 23.06 server leaves them (issue #36), replayed
through the PBS backend: each PBS case of the issue's first table, with the state the user
would call true.

A real PBS server cannot be installed here. The stand-in ``qstat`` of
``test_pbs_real_answers_replayed`` serves the real server's own records
(``../shared/reference/openpbs/qstat_x_f_F_json.json``); a subjob or shared job is one of
those records with the attributes the reference page gives for that path (its section
"Deletions, arrays and history off"): ``Exit_status``, ``substate``, ``comment``, history on
or off.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import test_pbs_real_answers_replayed as replayed

from hpcprof_kit.cli import main as cli_main
from hpcprof_kit.errors import SubmitError
from hpcprof_kit.jobs import Job, JobSpec
from hpcprof_kit.jobs.backends import SchedulerNotAnswering
from hpcprof_kit.jobs.backends.pbs import PbsBackend
from hpcprof_kit.jobs.rundir import RunDir

# the replayed server of the real answers, shared with that module
real_jobs, server = replayed.real_jobs, replayed.server

TERM_RECORD = {"exit_code": 143, "signal": 15, "ended_at": "2026-11-26T10:00:05+00:00"}
WALLTIME_LINE = "=>> PBS: job killed: walltime 37 exceeded limit 25\n"


def like(real_jobs, template: str, **attrs) -> dict:
    """A copy of one real record with the attributes of another path (None removes one)."""
    job = json.loads(json.dumps(real_jobs["Jobs"][template]))
    for key, value in attrs.items():
        if value is None:
            job.pop(key, None)
        else:
            job[key] = value
    return job


def variant(folder: Path, index: int, job_id: str, parent: str, *, in_turn: bool = False,
            record: dict | None = None, started: bool = False) -> Path:  # fmt: skip
    """A sweep variant's run directory as the kit's array (or shared job) leaves it."""
    run = folder / f"v{index}"
    run.mkdir()
    RunDir(run).update(backend="pbs", job_id=job_id, state="QUEUED", sweep=str(folder),
                       sweep_index=index, array_job_id=parent, in_turn=in_turn,
                       note="one job, variants in turn" if in_turn else "")  # fmt: skip
    if started or record is not None:
        (run / "stdout").write_text("")  # the array script's redirection made it
    if record is not None:
        (run / "job_end.json").write_text(json.dumps(record))
    return run


def kit_cancel(run: Path, job_id: str, exit_code: int = 0, said: str = "") -> None:
    """What the kit's ``cancel`` leaves in a run: its mark, then the server's answer."""
    (run / "cancel_requested").touch()
    RunDir(run).update(cancel={"asked_at": "T", "command": f"qdel {job_id}",
                               "exit_code": exit_code, "said": said,
                               "accepted": exit_code == 0})  # fmt: skip


def state(run: Path) -> tuple[str, int | None, str]:
    status = PbsBackend().poll(run, RunDir(run).manifest()["job_id"])
    return status.state, status.exit_code, status.note


def shared_sweep(isolated_runs, job_id: str, records: list[dict | None]):
    """A 3-variant Aurora sweep in the debug queue (one job per user): its variants run in
    turn inside ``job_id``, and each left the record given (None: none)."""
    base = JobSpec(system="aurora", account="P", queue="debug", walltime="00:05:00",
                   command=("bash", "-c", 'exit "$1"', "v"))  # fmt: skip
    sweep = base.sweep(**{"--code": ["0", "2", "0"]})
    sweep.create()
    for i, rec in enumerate(records):
        run = variant(sweep.path, i, job_id, job_id, in_turn=True, record=rec,
                      started=rec is not None)  # fmt: skip
        sweep.mark(i, run_dir=run.name, job_id=job_id, state="QUEUED")
    return sweep


def plant_timings(run: Path, steps_ms: list[float]) -> None:
    (run / "timings").mkdir(exist_ok=True)
    record = {"app": "train", "rank": 0, "world_size": 1, "nodes": 1, "dtype": "float32",
              "params": {"batch_size": 8}, "timings": {"step": [s / 1e3 for s in steps_ms]}}  # fmt: skip
    (run / "timings" / "train-0-of-1.json").write_text(json.dumps(record))


# ---- one job per user: the variants run in turn ------------------------------------------
def test_in_turn_the_middle_variant_fails_alone_and_resume_reruns_only_it(
    server,
    real_jobs,
    isolated_runs,
):
    server(added={"40.pbshost": like(real_jobs, "9.pbshost")})  # the job: Exit_status 1
    sweep = shared_sweep(isolated_runs, "40.pbshost",
                         [{"exit_code": 0}, {"exit_code": 2}, {"exit_code": 0}])  # fmt: skip
    for entry in sweep.record()["variants"]:  # a failing variant may have timed some steps
        plant_timings(sweep.path / entry["run_dir"], [10.0, 11.0, 12.0, 13.0, 14.0])
    states = sweep.refresh()
    assert states == {0: "COMPLETED", 1: "FAILED", 2: "COMPLETED"}
    codes = [RunDir(sweep.path / e["run_dir"]).manifest()["exit_code"]
             for e in sweep.record()["variants"]]  # fmt: skip
    assert codes == [0, 2, 0]
    assert [v.index for v in sweep.pending()] == [1]
    table = sweep.compare()
    assert list(table["state"]) == ["COMPLETED", "FAILED", "COMPLETED"]
    assert table.loc[[0, 2], "step_median_ms"].tolist() == [12.0, 12.0]
    assert table["step_median_ms"].isna().tolist() == [False, True, False]  # no times if FAILED
    csv = (sweep.path / "comparison.csv").read_text().splitlines()
    assert ",FAILED,0,,," in csv[2]


def test_in_turn_a_walltime_kill_during_variant_0_names_only_variant_0(
    server, real_jobs, isolated_runs, capsys
):
    server(added={"41.pbshost": like(real_jobs, "26.pbshost")})  # the job: Exit_status -29
    sweep = shared_sweep(isolated_runs, "41.pbshost", [TERM_RECORD, None, None])
    assert sweep.refresh() == {0: "TIMEOUT", 1: "NOT_STARTED", 2: "NOT_STARTED"}
    notes = [RunDir(sweep.path / e["run_dir"]).manifest()["note"]
             for e in sweep.record()["variants"]]  # fmt: skip
    assert "walltime ran out" in notes[0]
    assert notes[1] == notes[2] == "the walltime ended its job during an earlier variant"
    assert [v.index for v in sweep.pending()] == [0, 1, 2]
    table = sweep.compare()
    assert list(table["state"]) == ["TIMEOUT", "NOT_STARTED", "NOT_STARTED"]
    assert "\n(NOT_STARTED)" in sweep.plot().table["label"].iloc[1]
    assert ",NOT_STARTED,0,," in (sweep.path / "comparison.csv").read_text().splitlines()[2]
    assert cli_main(["status", str(sweep.path / sweep.record()["variants"][1]["run_dir"])]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown[:2] == ["NOT_STARTED  job 41.pbshost  exit code None",
                         "note: the walltime ended its job during an earlier variant"]  # fmt: skip


def test_in_turn_a_variant_waiting_for_its_turn_is_queued_not_running(server, real_jobs, tmp_path):
    server(added={"42.pbshost": like(real_jobs, "0.pbshost", job_state="R",
                                     Exit_status=None, substate=42)})  # fmt: skip
    first = variant(tmp_path, 0, "42.pbshost", "42.pbshost", in_turn=True, record={"exit_code": 0})
    second = variant(tmp_path, 1, "42.pbshost", "42.pbshost", in_turn=True, started=True)
    third = variant(tmp_path, 2, "42.pbshost", "42.pbshost", in_turn=True)
    assert state(first)[:2] == ("COMPLETED", 0)
    assert state(second)[0] == "RUNNING"
    assert state(third)[0] == "QUEUED" and "waits for its turn" in state(third)[2]


# ---- arrays: every deletion path ---------------------------------------------------------
def test_qdel_of_the_array_after_subjob_1_finished_leaves_it_completed(server, real_jobs, tmp_path):
    rewritten = like(real_jobs, "0.pbshost", Exit_status=1, substate=91,
                     comment="Subjob finished", array_id="52[].pbshost", array_index=1)  # fmt: skip
    server(added={"52[1].pbshost": rewritten})
    run = variant(tmp_path, 1, "52[1].pbshost", "52[].pbshost", record={"exit_code": 0})
    got, code, note = state(run)
    assert (got, code) == ("COMPLETED", 0)
    assert "PBS said CANCELLED 1, not this run's word" in note


def test_a_queued_subjob_deleted_polled_while_the_array_lives_never_started(
    server,
    real_jobs,
    tmp_path,
):
    said = like(real_jobs, "0.pbshost", job_state="X", Exit_status=None, substate=70,
                comment="Subjob finished", array_id="53[].pbshost", array_index=2)  # fmt: skip
    server(added={"53[2].pbshost": said})
    got, code, note = state(variant(tmp_path, 2, "53[2].pbshost", "53[].pbshost"))
    assert (got, code) == ("NOT_STARTED", None) and "deleted while queued" in note


def test_a_queued_subjob_deleted_polled_after_the_array_ended_never_started_and_reruns(
    server,
    real_jobs,
    isolated_runs,
):
    said = like(real_jobs, "0.pbshost", Exit_status=0, substate=92, comment="Subjob finished",
                array_id="54[].pbshost", array_index=1)  # fmt: skip
    server(added={"54[1].pbshost": said, "54[0].pbshost": like(real_jobs, "0.pbshost")})
    base = JobSpec(system="aurora", account="P", queue="capacity", walltime="00:05:00",
                   command=("bash", "-c", 'exit "$1"', "v"))  # fmt: skip
    sweep = base.sweep(**{"--code": ["0", "0"]})
    sweep.create()
    for i in (0, 1):
        run = variant(sweep.path, i, f"54[{i}].pbshost", "54[].pbshost",
                      record={"exit_code": 0} if i == 0 else None)  # fmt: skip
        sweep.mark(i, run_dir=run.name, job_id=f"54[{i}].pbshost", state="QUEUED")
    assert sweep.refresh() == {0: "COMPLETED", 1: "NOT_STARTED"}
    assert [v.index for v in sweep.pending()] == [1]  # --resume runs it, it is not skipped


def test_a_running_subjob_deleted_is_cancelled(server, real_jobs, tmp_path):
    said = like(real_jobs, "25.pbshost", Exit_status=143, array_id="55[].pbshost", array_index=0)
    server(added={"55[0].pbshost": said})
    got, code, note = state(variant(tmp_path, 0, "55[0].pbshost", "55[].pbshost",
                                    record=TERM_RECORD))  # fmt: skip
    assert (got, code) == ("CANCELLED", 143) and "deleted by pbsuser@pbshost" in note


# ---- history off -------------------------------------------------------------------------
UNKNOWN_CAUSE = (
    "exit code 143, killed by signal 15 (SIGTERM) (job_end.json); the cause is unknown: a qdel, "
    "the walltime (but PBS wrote no walltime line) or the program itself exiting 143 all leave "
    "this record, and PBS kept no record of the job (no job history) to tell which"
)


def test_history_off_a_sigterm_record_claims_no_cause_it_cannot_know(server, tmp_path):
    """cases.md rows 9 and 18: a qdel and a program's own exit 143 leave the same record, and
    the server without history forgets both: FAILED 143, the possible causes named."""
    server("off")  # the server forgot the job; its trap wrote 143 / 15
    (tmp_path / "gone").mkdir()
    (tmp_path / "gone" / "job_end.json").write_text(json.dumps(TERM_RECORD))
    assert state_of_plain(tmp_path / "gone", "25.pbshost") == ("FAILED", 143, UNKNOWN_CAUSE)


def test_history_off_a_trap_record_with_the_kits_own_qdel_is_cancelled_by_the_kit(
    server,
    tmp_path,
):
    server("off")
    run = tmp_path / "mine"
    run.mkdir()
    (run / "job_end.json").write_text(json.dumps(TERM_RECORD))
    kit_cancel(run, "25.pbshost")  # the kit's qdel, accepted by the server
    got, code, note = state_of_plain(run, "25.pbshost")
    assert (got, code, note) == (
        "CANCELLED",
        143,
        "cancelled by the kit (qdel); job_end.json: killed by signal 15 (SIGTERM)",
    )


def test_history_off_a_cancel_the_server_refused_is_not_the_kits_cancel(server, tmp_path):
    """cases.md row 53: qdel refused (server down, exit 162); the job then ran to its end."""
    server("off")
    run = tmp_path / "mine"
    run.mkdir()
    (run / "job_end.json").write_text(json.dumps({"exit_code": 0, "ended_at": "T"}))
    kit_cancel(run, "25.pbshost", 162, "Connection refused")
    assert state_of_plain(run, "25.pbshost") == ("COMPLETED", 0, "exit code from job_end.json")


def test_history_off_a_walltime_overrun_is_timeout_from_pbs_stderr_line(server, tmp_path):
    server("off")
    run = tmp_path / "wall"
    run.mkdir()
    (run / "job_end.json").write_text(json.dumps(TERM_RECORD))
    (run / "stderr").write_text("step 3\n" + WALLTIME_LINE)
    got, code, note = state_of_plain(run, "26.pbshost")
    assert (got, code) == ("TIMEOUT", 143)
    assert note == f"PBS's walltime: its stderr says {WALLTIME_LINE.strip()!r}"


def test_history_off_a_subjob_over_walltime_reads_the_arrays_stderr_line(server, tmp_path):
    server("off")  # the array has ended: every id is unknown
    run = variant(tmp_path, 3, "56[3].pbshost", "56[].pbshost", record=TERM_RECORD)
    (tmp_path / "sweep-train.e56.3").write_text(WALLTIME_LINE)  # PBS's file of subjob 3
    assert state(run)[:2] == ("TIMEOUT", 143)


def test_history_off_deleted_running_and_queued_subjobs_while_the_array_lives(
    server,
    real_jobs,
    tmp_path,
):
    finished = {"job_state": "X", "Exit_status": 1, "substate": 70, "comment": "Subjob finished"}
    server("off", added={
        "57[0].pbshost": like(real_jobs, "0.pbshost", **finished, array_id="57[].pbshost"),
        "57[1].pbshost": like(real_jobs, "0.pbshost", **finished, array_id="57[].pbshost"),
    })  # fmt: skip
    ran = variant(tmp_path, 0, "57[0].pbshost", "57[].pbshost", record=TERM_RECORD)
    queued = variant(tmp_path, 1, "57[1].pbshost", "57[].pbshost")
    assert state(ran) == ("FAILED", 143, UNKNOWN_CAUSE)  # cases.md row 38: X, Exit_status 1
    assert state(queued)[:2] == ("NOT_STARTED", None)


def test_history_off_deleted_subjobs_after_the_array_ended(server, tmp_path):
    server("off")  # every id unknown now
    ran = variant(tmp_path, 0, "58[0].pbshost", "58[].pbshost", record=TERM_RECORD)
    queued = variant(tmp_path, 1, "58[1].pbshost", "58[].pbshost")
    done = variant(tmp_path, 2, "58[2].pbshost", "58[].pbshost", record={"exit_code": 0})
    # a later variant ran: nothing says the array was deleted (qdel 'N[1]' alone, say)
    assert state(ran) == ("FAILED", 143, UNKNOWN_CAUSE)
    got, _, note = state(queued)
    assert got == "NOT_STARTED" and "no longer knows" in note
    assert state(done)[:2] == ("COMPLETED", 0)


def test_history_off_an_array_ended_before_its_last_variants_started_was_deleted(server,
                                                                                tmp_path):  # fmt: skip
    """cases.md row 37: `qdel 'N[]'` while 0 had finished, 1 ran (its trap: 143 / 15), 2 and
    3 were queued; the server then forgot them all. Only a deletion of the array ends it
    before 2 and 3 start: CANCELLED 143, the note says so."""
    server("off")
    done = variant(tmp_path, 0, "59[0].pbshost", "59[].pbshost", record={"exit_code": 0})
    ran = variant(tmp_path, 1, "59[1].pbshost", "59[].pbshost", record=TERM_RECORD)
    queued = [variant(tmp_path, i, f"59[{i}].pbshost", "59[].pbshost") for i in (2, 3)]
    got, code, note = state(ran)
    assert (got, code) == ("CANCELLED", 143)
    assert note.startswith("deleted (qdel) with its array while it ran: ")
    assert "but the array ended before variants 2, 3 ever started" in note
    assert [state(q)[0] for q in queued] == ["NOT_STARTED"] * 2
    assert state(done)[:2] == ("COMPLETED", 0)


def test_history_off_variants_the_kit_cancelled_before_they_ran_show_no_deletion(server,
                                                                                tmp_path):  # fmt: skip
    """The kit cancelled 2 and 3 while queued; 1 then ended 143 and the array with it: no
    sign of a deletion of the array, so the cause stays unknown."""
    server("off")
    ran = variant(tmp_path, 1, "60[1].pbshost", "60[].pbshost", record=TERM_RECORD)
    for i in (2, 3):
        kit_cancel(variant(tmp_path, i, f"60[{i}].pbshost", "60[].pbshost"), f"60[{i}].pbshost")
    assert state(ran) == ("FAILED", 143, UNKNOWN_CAUSE)


def state_of_plain(run: Path, job_id: str) -> tuple[str, int | None, str]:
    status = PbsBackend().poll(run, job_id)
    return status.state, status.exit_code, status.note


# ---- cancel what the user named ----------------------------------------------------------
QDEL = """
import json, os, sys
open(LOG, "a").write(" ".join(sys.argv[1:]) + "\\n")
jobs = json.load(open(os.environ["REPLAY_JOBS"]))
jobs["Jobs"][sys.argv[1]] = jobs["Jobs"]["25.pbshost"]
json.dump(jobs, open(os.environ["REPLAY_JOBS"], "w"))
"""


@pytest.fixture
def qdel_log(tmp_path, monkeypatch) -> Path:
    """A stand-in qdel that writes down what it was asked to delete; the replayed server then
    answers for that job what the real one answered after a qdel of a running job (25)."""
    folder = tmp_path / "qdel-bin"
    folder.mkdir()
    log = tmp_path / "qdel.log"
    qdel = folder / "qdel"
    qdel.write_text(f"#!{sys.executable}\n" + QDEL.replace("LOG", repr(str(log))))
    qdel.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    log.write_text("")
    return log


def test_cancel_of_a_variant_not_yet_started_skips_it_and_the_job_goes_on(
    server,
    real_jobs,
    isolated_runs,
    qdel_log,
):
    server(added={"43.pbshost": like(real_jobs, "0.pbshost", job_state="R", Exit_status=None,
                                     substate=42)})  # fmt: skip
    sweep = shared_sweep(isolated_runs, "43.pbshost", [{"exit_code": 0}, None, None])
    runs = [sweep.path / e["run_dir"] for e in sweep.record()["variants"]]
    (runs[1] / "turn").write_text("started\n")  # variant 1's turn has come
    (runs[1] / "stdout").write_text("")
    assert Job.from_run_dir(runs[2]).cancel() == "CANCELLED"
    assert qdel_log.read_text() == ""  # the job was not deleted
    assert (runs[2] / "turn").read_text() == "skipped\n"
    assert Job.from_run_dir(runs[1]).refresh() == "RUNNING"
    # the job's own loop passes it over: the same claim it makes for each turn
    claim = subprocess.run(["bash", "-c", f'(set -C; echo started >"{runs[2]}/turn") 2>/dev/null'])
    assert claim.returncode != 0


def test_cancel_of_the_running_variant_asks_for_all_and_deletes_nothing(
    server,
    real_jobs,
    isolated_runs,
    qdel_log,
):
    server(added={"44.pbshost": like(real_jobs, "0.pbshost", job_state="R", Exit_status=None,
                                     substate=42)})  # fmt: skip
    sweep = shared_sweep(isolated_runs, "44.pbshost", [None, None, None])
    runs = [sweep.path / e["run_dir"] for e in sweep.record()["variants"]]
    (runs[0] / "turn").write_text("started\n")
    (runs[0] / "stdout").write_text("")
    with pytest.raises(SubmitError, match="pass --all") as err:
        Job.from_run_dir(runs[0]).cancel()
    assert f"skip 2 variant(s) not begun ({runs[1].name}, {runs[2].name})" in str(err.value)
    assert qdel_log.read_text() == ""
    Job.from_run_dir(runs[0]).cancel(whole_job=True)
    assert qdel_log.read_text() == "44.pbshost\n"  # one id per call, as the server needs
    assert [(r / "turn").read_text() for r in runs[1:]] == ["skipped\n", "skipped\n"]


def test_a_silent_server_leaves_a_variant_to_its_record_and_a_plain_job_waiting(
    tmp_path, monkeypatch
):
    folder = tmp_path / "silent-bin"
    folder.mkdir()
    (folder / "qstat").write_text("#!/bin/bash\necho 'cannot connect to server pbshost' >&2\n"
                                  "exit 1\n")  # fmt: skip
    (folder / "qstat").chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    done = variant(tmp_path, 0, "45.pbshost", "45.pbshost", in_turn=True, record={"exit_code": 0})
    assert state(done)[:2] == ("COMPLETED", 0)  # its turn is over whatever the job does next
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "job_end.json").write_text('{"exit_code": 0}')
    with pytest.raises(SchedulerNotAnswering, match="cannot connect to server pbshost"):
        PbsBackend().poll(plain, "46.pbshost")  # 0 waits for the server's word on a plain job


def test_a_plain_job_the_server_calls_failed_143_stays_failed(server, real_jobs, tmp_path):
    """Not every SIGTERM is a qdel: a server that still knows the job and says it failed
    (substate 93, no "terminated by") has the last word."""
    server(added={"47.pbshost": like(real_jobs, "9.pbshost", Exit_status=143)})
    run = tmp_path / "term"
    run.mkdir()
    (run / "job_end.json").write_text(json.dumps(TERM_RECORD))
    got, code, note = state_of_plain(run, "47.pbshost")
    assert (got, code, note) == ("FAILED", 143, "exit code 143: killed by signal 15 (SIGTERM)")


def test_in_turn_pbs_own_kill_names_the_variant_then_running(server, real_jobs, tmp_path):
    """PBS killed the shared job for memory (-27): the variant that ran then has it, the one
    before keeps its COMPLETED, the one after never started."""
    server(added={"48.pbshost": like(real_jobs, "9.pbshost", Exit_status=-27)})
    done = variant(tmp_path, 0, "48.pbshost", "48.pbshost", in_turn=True, record={"exit_code": 0})
    hit = variant(tmp_path, 1, "48.pbshost", "48.pbshost", in_turn=True, record=TERM_RECORD)
    later = variant(tmp_path, 2, "48.pbshost", "48.pbshost", in_turn=True)
    assert state(done)[:2] == ("COMPLETED", 0)
    got, code, note = state(hit)
    assert (got, code) == ("FAILED", -27) and "JOB_EXEC_KILL_MEM" in note
    assert state(later)[:2] == ("NOT_STARTED", None)


def test_cancel_of_a_shared_job_with_no_other_variant_left_deletes_it(
    server, real_jobs, isolated_runs, qdel_log
):
    server(added={"49.pbshost": like(real_jobs, "0.pbshost", job_state="R", Exit_status=None,
                                     substate=42)})  # fmt: skip
    sweep = shared_sweep(isolated_runs, "49.pbshost", [{"exit_code": 0}, {"exit_code": 0}, None])
    last = runs_in(sweep)[2]
    (last / "turn").write_text("started\n")
    (last / "stdout").write_text("")
    assert Job.from_run_dir(last).cancel() == "CANCELLED"  # it ends nothing else
    assert qdel_log.read_text() == "49.pbshost\n"


def runs_in(sweep) -> list[Path]:
    return [sweep.path / e["run_dir"] for e in sweep.record()["variants"]]


def test_history_off_an_in_turn_variant_cut_without_its_record(server, tmp_path):
    """Its turn began (stdout) but no record was written (SIGKILL before the trap ran): the
    kit's own cancel, accepted by the server, makes it CANCELLED; a cancel the server refused,
    or none, leaves nothing to say how it ended."""
    server("off")
    mine = variant(tmp_path, 0, "50.pbshost", "50.pbshost", in_turn=True, started=True)
    kit_cancel(mine, "50.pbshost")
    assert state(mine)[:2] == ("CANCELLED", None)
    refused = variant(tmp_path, 2, "52.pbshost", "52.pbshost", in_turn=True, started=True)
    kit_cancel(refused, "52.pbshost", 162, "Connection refused")
    assert state(refused)[0] == "LOST"
    other = variant(tmp_path, 1, "51.pbshost", "51.pbshost", in_turn=True, started=True)
    got, _, note = state(other)
    assert got == "LOST" and "its turn began (stdout) but it left no job_end.json" in note


def test_history_off_a_failed_subjob_blames_no_array_deletion(server, real_jobs, tmp_path):
    """cases.md row 41: with history off a finished subjob reads X, Exit_status 1 while its
    array lives; nothing was deleted, and the note must not say it was."""
    finished = {"job_state": "X", "Exit_status": 1, "substate": 70, "comment": "Subjob finished"}
    server("off", added={
        "59[1].pbshost": like(real_jobs, "0.pbshost", **finished, array_id="59[].pbshost"),
    })  # fmt: skip
    run = variant(tmp_path, 1, "59[1].pbshost", "59[].pbshost", record={"exit_code": 3})
    assert state(run) == (
        "FAILED", 3,
        "exit code from job_end.json; PBS said FAILED 1, not this run's word: PBS shows a "
        "finished subjob's Exit_status as 1 while its array lives when it keeps no job history",
    )  # fmt: skip


def test_history_off_a_running_variant_the_kit_cancelled_is_143_not_pbs_placeholder(
    server,
    real_jobs,
    tmp_path,
):
    """cases.md row 40: X, Exit_status 1 (PBS's placeholder); the trap's record says 143."""
    finished = {"job_state": "X", "Exit_status": 1, "substate": 70, "comment": "Subjob finished"}
    server("off", added={
        "60[1].pbshost": like(real_jobs, "0.pbshost", **finished, array_id="60[].pbshost"),
    })  # fmt: skip
    run = variant(tmp_path, 1, "60[1].pbshost", "60[].pbshost", record=TERM_RECORD)
    kit_cancel(run, "60[1].pbshost")
    assert state(run) == (
        "CANCELLED",
        143,
        "cancelled by the kit (qdel); job_end.json: killed by signal 15 (SIGTERM)",
    )
