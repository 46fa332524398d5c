"""``hpcprof-kit explain`` of a sweep variant that never started (issue #36): it says so, why
(what its run directory and its server say), and that ``sweep --resume`` runs it again.

A real PBS server cannot be installed here: the stand-in ``qstat`` of
``test_pbs_real_answers_replayed`` serves the real OpenPBS 23.06 server's own records, with the
attributes the reference page gives for each path (as ``test_pbs_variants_replayed`` does).
"""

from __future__ import annotations

import test_pbs_real_answers_replayed as replayed
import test_pbs_variants_replayed as variants

from hpcprof_kit.cli import main as cli_main
from hpcprof_kit.jobs import Job
from hpcprof_kit.jobs.explain import explain

# the replayed server of the real answers, shared with that module
real_jobs, server = replayed.real_jobs, replayed.server
like, variant = variants.like, variants.variant


def explained(capsys, run) -> list[str]:
    assert cli_main(["explain", str(run)]) == 0
    return capsys.readouterr().out.splitlines()


def resume_line(why: str, sweep) -> str:
    return (f"  what to do: it never started: {why}; hpcprof-kit sweep --resume {sweep} runs it "
            "again, with the sweep's other variants that did not complete")  # fmt: skip


def test_explain_in_turn_variant_whose_job_hit_its_walltime_before_its_turn(
    server, real_jobs, isolated_runs, capsys
):
    server(added={"41.pbshost": like(real_jobs, "26.pbshost")})  # the job: Exit_status -29
    sweep = variants.shared_sweep(isolated_runs, "41.pbshost", [variants.TERM_RECORD, None, None])
    run = sweep.path / sweep.record()["variants"][1]["run_dir"]
    shown = explained(capsys, run)
    assert shown[0] == "job 41.pbshost ended NOT_STARTED"
    assert shown[-2:] == [
        "  no output: it never ran",
        resume_line("the walltime ended its job during an earlier variant", sweep.path),
    ]
    assert not any(line.startswith("  exit code") for line in shown)
    # the variant that was running when the walltime hit is the one that says TIMEOUT
    first = explained(capsys, sweep.path / sweep.record()["variants"][0]["run_dir"])
    assert first[0] == "job 41.pbshost ended TIMEOUT"


def test_explain_subjob_deleted_while_queued(server, real_jobs, tmp_path, capsys):
    said = like(real_jobs, "0.pbshost", job_state="X", Exit_status=None, substate=70,
                comment="Subjob finished", array_id="53[].pbshost", array_index=2)  # fmt: skip
    server(added={"53[2].pbshost": said})
    run = variant(tmp_path, 2, "53[2].pbshost", "53[].pbshost")
    shown = explained(capsys, run)
    assert shown[0] == "job 53[2].pbshost ended NOT_STARTED"
    assert ("  scheduler's reason: Subjob finished (PBS's word for any subjob that left the "
            "queue, whether it ran or not)") in shown  # fmt: skip
    why = "PBS ended the subjob before it ran (deleted while queued): no output, no record"
    assert shown[-1] == resume_line(why, tmp_path)


def test_explain_subjob_whose_array_was_deleted_before_it_ran(server, real_jobs, tmp_path, capsys):
    """qdel 'N[]' ends the subjobs still queued: the server's substate 91, no Exit_status."""
    said = like(real_jobs, "0.pbshost", Exit_status=None, substate=91,
                comment="Subjob finished", array_id="59[].pbshost", array_index=3)  # fmt: skip
    server(added={"59[3].pbshost": said})
    run = variant(tmp_path, 3, "59[3].pbshost", "59[].pbshost")
    shown = explained(capsys, run)
    assert shown[0] == "job 59[3].pbshost ended NOT_STARTED"
    why = "PBS deleted its array (qdel) before this subjob ran: no output, no record"
    assert shown[-1] == resume_line(why, tmp_path)
    # in Python, the same in the Sweep's words
    text = explain(Job.from_run_dir(run))
    assert f"Sweep.load({str(tmp_path)!r}).run() runs it again" in text


def test_explain_history_off_a_subjob_the_server_forgot_before_it_ran(server, tmp_path, capsys):
    server("off")  # the array has ended: every id unknown
    run = variant(tmp_path, 1, "58[1].pbshost", "58[].pbshost")
    shown = explained(capsys, run)
    assert shown[0] == "job 58[1].pbshost ended NOT_STARTED"
    why = "PBS no longer knows the subjob (no job history), and it left no output"
    assert shown[-1] == resume_line(why, tmp_path)
