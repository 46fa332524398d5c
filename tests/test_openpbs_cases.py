"""The cases of ``../shared/reference/openpbs/cases.md`` against the PBS twin (issue #49).

A real OpenPBS 23.06.06 server was run with queues, a custom resource and job history on, off
and unset, and the kit was tried on it as a user would. A real PBS server cannot be installed
here, so every case runs against the rehearsal's twin of a small generic PBS cluster
(``twin.build_generic``: one node, a queue ``workq``, history on or off), with the record
``hpcprof-kit site init --scheduler pbs`` writes for it. The answers expected are the real
server's column of ``cases.md`` (its state, exit status, comment and the job's own files) and
what the kit may rightly say of them, never what the twin happens to do: each test's id starts
with the case number.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest

from hpcprof_kit.cli import main
from hpcprof_kit.jobs import Job, JobSpec, submit
from hpcprof_kit.jobs.backends.pbs import attributes
from hpcprof_kit.jobs.explain import explain
from hpcprof_kit.rehearsal import twin as twin_mod
from hpcprof_kit.systems import load_system

from must_have import missing
from slurm_cluster import _until  # the tests' one poll of an answer until it is reached

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(600)]

CNR = "Can Never Run: Not enough total nodes available"
UNKNOWN_CAUSE = (
    "exit code 143, killed by signal 15 (SIGTERM) (job_end.json); the cause is unknown: a qdel, "
    "the walltime (but PBS wrote no walltime line) or the program itself exiting 143 all leave "
    "this record, and PBS kept no record of the job (no job history) to tell which"
)


def build(
    tmp_path,
    monkeypatch,
    history: bool,
    max_queued: int | None = None,
    closed: bool = False,
    stage_delay_s: float = 0.0,
    exclusive: bool = False,
    refused_uids: tuple[int, ...] = (),
    queues: dict[str, dict] | None = None,
):
    """The twin of a one-node PBS cluster ``pbshost`` whose queue takes jobs of up to 2 nodes
    (as the server of cases.md row 14, where a 2-node job could never run), and its record;
    ``max_queued``: the jobs a user may queue (1: a sweep runs its variants in turn);
    ``queues``: more queues beside ``workq``, as the server's configuration gives them."""
    queue = {"max_nodes": 2, "max_walltime": "00:30:00"}
    if max_queued is not None:
        queue["max_queued"] = max_queued
    queues = {"workq": queue, **(queues or {})}
    if closed:  # a queue the site has disabled, as `closed` of cases.md
        queues["closed"] = {**queue, "enabled": False}
    twin = twin_mod.build_generic(tmp_path / "twin", "pbshost", kill_grace_s=1.0,
                                  job_history=history, queues=queues,
                                  stage_delay_s=stage_delay_s,
                                  exclusive_nodes=exclusive,
                                  refused_uids=refused_uids)  # fmt: skip
    records = tmp_path / "records"
    monkeypatch.setenv("PATH", f"{twin.bin}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("HPCPROF_SYSTEMS_DIR", str(records))
    monkeypatch.setenv("HOME", str(tmp_path / "user-home"))
    assert main(["site", "init", "--scheduler", "pbs"]) == 0
    path = records / "pbshost.toml"
    text = path.read_text()
    old = '# default_venv = "$HOME/venvs/hpcprof-kit"'
    assert old in text
    path.write_text(text.replace(old, f"default_venv = {json.dumps(str(twin.kit_venv))}"))
    return twin


def set_queue(twin, queue: str, **attrs) -> None:
    """The server's admin sets a queue's attributes after site init (as `qmgr -c 'set queue
    QUEUE max_queued = [u:PBS_GENERIC=N]'`): the record does not hear of it."""
    twin.config["server"]["queues"][queue].update(attrs)
    twin._write_config()


@pytest.fixture
def pbs_on(tmp_path, monkeypatch, isolated_runs, capsys):
    twin = build(tmp_path, monkeypatch, history=True)
    capsys.readouterr()
    return twin


@pytest.fixture
def pbs_off(tmp_path, monkeypatch, isolated_runs, capsys):
    twin = build(tmp_path, monkeypatch, history=False)
    capsys.readouterr()
    return twin


def job_of(command: list[str], nodes: int = 1, walltime: str = "00:05:00") -> Job:
    spec = JobSpec(system="pbshost", ranks_per_node=1, nodes=nodes, walltime=walltime,
                   binding="none", command=command)  # fmt: skip
    return submit(spec, backend="pbs")


def gate_on(path: Path, timeout: float = 120.0) -> None:
    """Wait for a file the job (or the server) writes: never a sleep against a poll."""
    appeared, _ = _until(path.exists, bool, timeout, interval=0.05)
    assert appeared, f"{path} never appeared"


def until_state(job_id: str, letter: str, timeout: float = 120.0) -> None:
    """Until the twin's server shows the job in ``letter`` (a gate on the server)."""
    ok, last = _until(lambda: (attributes(job_id) or {}).get("job_state"),
                      lambda s: s == letter, timeout, interval=0.05)  # fmt: skip
    assert ok, f"{job_id} never reached {letter} (last {last})"


def qdel(twin, job_id: str) -> None:
    done = subprocess.run(["qdel", job_id], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def running(tmp_path, then: str) -> list[str]:
    """A command that writes ``started`` in ``tmp_path``, then runs the shell words ``then``."""
    return ["bash", "-c", f"touch {tmp_path / 'started'}; {then}"]


def first_variant(sweep_dir: Path) -> dict:
    """The manifest of the sweep's first variant."""
    first = sorted(p for p in sweep_dir.iterdir() if (p / "manifest.json").exists())[0]
    return json.loads((first / "manifest.json").read_text())


def last_lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()]


# ---- jobs that end by themselves ------------------------------------------------------------
@pytest.mark.parametrize("history", ["on", "off"])
def test_05_07_twin_exit_0_and_exit_3_with_the_stderr_line(history, request, tmp_path):
    """Rows 5-7: exit 0 is COMPLETED; exit 3 is FAILED 3 and explain shows its stderr line."""
    request.getfixturevalue(f"pbs_{history}")
    ok = job_of(["true"])
    bad = job_of(["bash", "-c", "echo 'sl.sh: exiting with 3' >&2; exit 3"])
    assert ok.wait(timeout=120, progress=False) == "COMPLETED" and ok.exit_code == 0
    assert bad.wait(timeout=120, progress=False) == "FAILED" and bad.exit_code == 3
    said = explain(bad, cli=True)
    assert "    | sl.sh: exiting with 3" in said.splitlines()
    assert "stderr is empty" not in said


def test_08_twin_program_exits_143_by_itself_history_on(pbs_on):
    """Row 8: F, 93, Exit_status 143, "... and failed": FAILED 143."""
    job = job_of(["bash", "-c", "exit 143"])
    assert job.wait(timeout=120, progress=False) == "FAILED" and job.exit_code == 143
    assert job.manifest["comment"].endswith(" and failed")


def test_09_twin_program_exits_143_by_itself_history_off_claims_no_qdel(pbs_off):
    """Row 9: the server forgot the job (Unknown Job Id) and only its record says 143: the
    kit must not say it was deleted."""
    job = job_of(["bash", "-c", "exit 143"])
    assert job.wait(timeout=120, progress=False) == "FAILED" and job.exit_code == 143
    assert attributes(job.job_id) is None
    assert job.manifest["note"] == UNKNOWN_CAUSE
    assert "cancel" not in job.manifest


@pytest.mark.parametrize("history", ["on", "off"])
def test_13_20_twin_walltime_overrun_is_timeout(history, request, tmp_path):
    """Rows 13 and 20: PBS's stderr line `=>> PBS: job killed: walltime N exceeded limit M`;
    history on: Exit_status -29; off: the line alone says it was the walltime."""
    request.getfixturevalue(f"pbs_{history}")
    job = job_of(["sleep", "60"], walltime="00:00:02")
    assert job.wait(timeout=120, progress=False) == "TIMEOUT"
    assert job.exit_code == (-29 if history == "on" else 143)
    err = (job.run_dir / "stderr").read_text()
    assert "=>> PBS: job killed: walltime 3 exceeded limit 2" in err


# ---- deletions --------------------------------------------------------------------------------
@pytest.mark.parametrize(("history", "by_kit"), [("on", False), ("on", True), ("off", False),
                                                 ("off", True)])  # fmt: skip
def test_11_12_18_19_twin_a_running_job_deleted(history, by_kit, request, tmp_path):
    """Rows 11, 12 (history on: F, 91, Exit_status 271, "terminated by USER@HOST"), 18 and 19
    (history off: forgotten; the trap's record says 143 / 15). Off, only the kit's own
    accepted cancel is known to be one; another's qdel is FAILED 143, its causes named."""
    twin = request.getfixturevalue(f"pbs_{history}")
    job = job_of(running(tmp_path, "sleep 60"))
    gate_on(tmp_path / "started")
    if by_kit:
        assert main(["cancel", str(job.run_dir)]) == 0
    else:
        qdel(twin, job.job_id)
    state = job.wait(timeout=120, progress=False)
    if history == "on":
        assert (state, job.exit_code) == ("CANCELLED", 271)
        assert job.manifest["comment"].endswith(f"terminated by {twin.config['user']}@login-twin")
    elif by_kit:
        assert (state, job.exit_code) == ("CANCELLED", 143)
        assert job.manifest["note"] == (
            "cancelled by the kit (qdel); job_end.json: killed by signal 15 (SIGTERM)"
        )
    else:
        assert (state, job.exit_code, job.manifest["note"]) == ("FAILED", 143, UNKNOWN_CAUSE)


@pytest.mark.parametrize(("history", "by_kit"), [("on", False), ("on", True), ("off", False),
                                                 ("off", True)])  # fmt: skip
def test_10_16_17_twin_a_queued_job_deleted(history, by_kit, request, capsys):
    """Rows 10 and 17 (history on: F, 91, no Exit_status, no output), 16 and 17 (history off:
    Unknown Job Id). The kit's cancel is CANCELLED either way; another's qdel is CANCELLED
    before it ran with history, LOST without (neither can say more)."""
    twin = request.getfixturevalue(f"pbs_{history}")
    twin.set_scheduling(False)  # it stays queued
    job = job_of(["true"])
    assert job.refresh() == "QUEUED"
    if by_kit:
        assert main(["cancel", str(job.run_dir)]) == 0
    else:
        qdel(twin, job.job_id)
    state = job.wait(timeout=120, progress=False)
    if by_kit or history == "on":
        assert (state, job.exit_code) == ("CANCELLED", None)
    else:
        assert (state, job.exit_code) == ("LOST", None)
    assert not (job.run_dir / "stdout").exists() and not (job.run_dir / "job_end.json").exists()


# ---- a job that can never run ------------------------------------------------------------
@pytest.mark.parametrize("history", ["on", "off"])
def test_14_15_21_twin_can_never_run_then_deleted_is_told_to_change_the_request(
    history, request, capsys
):
    """Row 14: Q, "Can Never Run: ..."; the wait ends at once, advice: change the request.
    Rows 15 and 21: once deleted, the advice is still to change the request (not to submit
    it again unchanged), and with history off the reason is kept."""
    twin = request.getfixturevalue(f"pbs_{history}")
    job = job_of(["true"], nodes=2)
    assert job.wait(timeout=120, progress=False) == "QUEUED"
    assert job.manifest["comment"] == CNR
    said = explain(job, cli=True)
    assert (
        f"  scheduler's reason: {CNR} (the request can never fit this server: ask for fewer "
        "nodes or another queue)" in said
    )
    assert "what to do: it can never start as asked" in said
    qdel(twin, job.job_id)
    state = job.wait(timeout=120, progress=False)
    said = explain(job, cli=True)
    if history == "on":
        assert state == "CANCELLED"
        assert job.manifest["comment"] == f"{CNR} and terminated"
        assert (
            f"  scheduler's reason: {CNR} and terminated (ended: the request could never fit "
            "this server, and the job was deleted (qdel) before it ran)"
        ) in said
    else:
        assert state == "LOST"
        assert job.manifest["comment"] == CNR  # kept though the server forgot the job
        assert f"  scheduler's last reason (kept by the kit): {CNR}" in said
    advice = next(line for line in said.splitlines() if "what to do:" in line)
    assert advice == (
        "  what to do: it could never start as asked (the scheduler's reason above says why) "
        "and was deleted before it ran: submitting the same request again would wait for ever; "
        f"submit again with a request that fits (hpcprof-kit submit --spec {job.run_dir} with "
        "fewer --nodes, a shorter --walltime, or another --queue)"
    )


# ---- a held job ---------------------------------------------------------------------------------
@pytest.mark.parametrize("history", ["on", "off"])
def test_22_twin_a_held_job_is_told_qrls_then_runs(history, request, capsys):
    """Row 22: H, "Job held by USER on ...": the kit says held and `qrls`, not "waiting for
    nodes"; released, it runs to its end."""
    twin = request.getfixturevalue(f"pbs_{history}")
    twin.set_scheduling(False)
    job = job_of(["true"])
    assert job.refresh() == "QUEUED"
    done = subprocess.run(["qhold", job.job_id], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    twin.set_scheduling(True)  # the scheduler runs again; the hold keeps the job
    assert job.refresh() == "QUEUED"
    assert job.manifest["note"] == "held: it waits for a release (qrls), not for nodes"
    assert job.manifest["comment"].startswith(f"Job held by {twin.config['user']} on ")
    assert main(["explain", str(job.run_dir)]) == 0
    out = capsys.readouterr().out
    assert "waiting for nodes" not in out
    assert (f"(held (qhold): `qrls {job.job_id}` lets it run)") in out
    assert (
        f"  what to do: it is held, so it waits for a release, not for nodes: release it "
        f"(qrls {job.job_id}), then look again (hpcprof-kit explain {job.run_dir}), or stop "
        f"it with hpcprof-kit cancel {job.run_dir}"
    ) in out
    done = subprocess.run(["qrls", job.job_id], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert job.wait(timeout=120, progress=False) == "COMPLETED"
    assert job.manifest.get("note", "") != "held: it waits for a release (qrls), not for nodes"


# ---- a cancel while the server is down ---------------------------------------------------------
@pytest.mark.parametrize("history", ["on", "off"])
def test_53_54_twin_a_cancel_refused_by_a_down_server_is_no_cancel(history, request, tmp_path,
                                                                   capsys):  # fmt: skip
    """Rows 53 and 54: qdel exit 162 "Connection refused"; the job ran to its end (0)."""
    twin = request.getfixturevalue(f"pbs_{history}")
    job = job_of(running(tmp_path, f"until [ -e {tmp_path / 'go'} ]; do sleep 0.1; done"))
    gate_on(tmp_path / "started")
    twin.set_server_down(True)
    assert main(["cancel", str(job.run_dir)]) == 2
    assert "The job was not cancelled: it runs on" in capsys.readouterr().err
    (tmp_path / "go").touch()
    gate_on(job.run_dir / "job_end.json")
    twin.set_server_down(False)
    assert job.wait(timeout=120, progress=False) == "COMPLETED" and job.exit_code == 0
    assert "cancelled by the kit" not in job.manifest.get("note", "")


# ---- a sweep as a whole ----------------------------------------------------------------------
SWEEP = ["sweep", "--system", "pbshost", "--backend", "pbs", "--ranks-per-node", "1",
         "--walltime", "00:05:00", "--binding", "none"]  # fmt: skip
# Each variant runs `bash -c SCRIPT v --code WORD`: it touches started-WORD, then exits WORD,
# or, for `hang`, waits for ever.
WORDS = 'touch {folder}/started-"$2"; if [ "$2" = hang ]; then sleep 600; fi; exit "$2"'


def sweep_cli(tmp_path, capsys, words: str, *flags: str) -> tuple[int, str, Path]:
    code = main([*SWEEP, f"--vary=--code={words}", *flags, "--", "bash", "-c",
                 WORDS.format(folder=tmp_path), "v"])  # fmt: skip
    out = capsys.readouterr().out
    sweep_dir = Path(out.splitlines()[0].removeprefix("sweep "))
    return code, out, sweep_dir


# A stand-in for the train app: each rank writes the arguments it got to argv-RANK.json in its
# run directory.
ARGV_APP = """\
import json, os, sys
rank = os.environ["PMI_RANK"]
with open(os.path.join(os.environ["HPCPROF_RUN_DIR"], "argv-" + rank + ".json"), "w") as fh:
    json.dump(sys.argv[1:], fh)
"""


def argv_app(tmp_path) -> list[str]:
    app = tmp_path / "argv_app.py"
    app.write_text(ARGV_APP)
    return ["python3", str(app)]


def argvs(sweep_dir: Path, ranks: int = 1) -> list[list[list[str]]]:
    """What each variant's ranks got, in variant order."""
    runs = sorted(p for p in sweep_dir.iterdir() if (p / "manifest.json").exists())
    return [[json.loads((r / f"argv-{k}.json").read_text()) for k in range(ranks)] for r in runs]


def ended_subjobs(parent: str, indices) -> list[tuple]:
    """The server's record of each subjob: state, substate, exit status."""
    attrs = [attributes(parent.replace("[]", f"[{i}]")) for i in indices]
    return [(a["job_state"], int(a["substate"]), int(a["Exit_status"])) for a in attrs]


def test_24_twin_a_sweep_of_epochs_1_2_is_an_array_of_2_each_variant_its_value(pbs_on, tmp_path,
                                                                               capsys):  # fmt: skip
    """Row 24: `--vary=--epochs=1,2`, 2 ranks (a stand-in for train that records its
    arguments): `N[0]`, `N[1]` F, 92, Exit_status 0; COMPLETED x2, and each variant's ranks
    got their own `--epochs`."""
    code = main([*SWEEP, "--ranks-per-node", "2", "--vary=--epochs=1,2", "--wait", "--",
                 *argv_app(tmp_path)])  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    sweep_dir = Path(lines[0].removeprefix("sweep "))
    parent = lines[1].split("submitted job: ")[1].split(" ")[0]
    assert "#PBS -J 0-1\n" in (sweep_dir / "array.sh").read_text()
    assert lines[2:4] == ["    0 COMPLETED  --epochs=1", "    1 COMPLETED  --epochs=2"]
    assert ended_subjobs(parent, (0, 1)) == [("F", 92, 0)] * 2
    assert argvs(sweep_dir, ranks=2) == [[["--epochs", "1"]] * 2, [["--epochs", "2"]] * 2]


def test_25_twin_values_reach_the_app_exactly_as_typed(pbs_on, tmp_path, capsys):
    """Row 25: `--seed=0,1` x `--tag=False,a b$HOME`: `N[0..3]` F, Exit_status 0, and the
    app's argv holds each value as typed (no bool, no split, no expansion)."""
    code = main([*SWEEP, "--vary=--seed=0,1", "--vary=--tag=False,a b$HOME", "--wait", "--",
                 *argv_app(tmp_path)])  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    assert code == 0
    sweep_dir = Path(lines[0].removeprefix("sweep "))
    parent = lines[1].split("submitted job: ")[1].split(" ")[0]
    assert [line.split()[1] for line in lines[2:6]] == ["COMPLETED"] * 4
    assert ended_subjobs(parent, range(4)) == [("F", 92, 0)] * 4
    assert argvs(sweep_dir) == [
        [["--seed", "0", "--tag", "False"]], [["--seed", "0", "--tag", "a b$HOME"]],
        [["--seed", "1", "--tag", "False"]], [["--seed", "1", "--tag", "a b$HOME"]]]  # fmt: skip


SUBMITTED = (
    "the script submitted (array.sh in the sweep directory; each variant's run directory is made "
    "at submission):"
)


def test_26_twin_dry_run_prints_the_array_script_that_is_submitted(pbs_on, tmp_path, capsys,
                                                                   isolated_runs):  # fmt: skip
    """Row 26: `--dry-run` prints the array script the sweep then submits as `array.sh`,
    identical but for the run-dir placeholders it announces; each variant's own job.sh is not
    printed, only its command."""
    words = [*SWEEP, "--vary=--code=0,1"]
    command = ["--", "bash", "-c", 'exit "$2"', "v"]
    assert main([*words, "--dry-run", *command]) == 0
    preview = capsys.readouterr().out
    head, script = preview.split(SUBMITTED + "\n")
    assert head.splitlines() == [
        "sweep of bash on pbshost: 2 variants, one PBS job array (qsub)",
        "(a preview: nothing is run and nothing is written)",
        """  0  --code=0  bash -c 'exit "$2"' v --code 0""",
        """  1  --code=1  bash -c 'exit "$2"' v --code 1""",
    ]
    assert "hpcprof_job_end" not in preview  # no variant's job.sh
    assert not isolated_runs.exists() and pbs_on.events("qsub") == []
    assert main([*words, "--wait", *command]) == 1
    sweep_dir = Path(capsys.readouterr().out.splitlines()[0].removeprefix("sweep "))
    submitted = (sweep_dir / "array.sh").read_text()
    for entry in json.loads((sweep_dir / "sweep.json").read_text())["variants"]:
        placeholder = shlex.quote(f"<sweep>/<run of variant {entry['index']}>")
        real = shlex.quote(str(sweep_dir / entry["run_dir"]))
        submitted = submitted.replace(f"run_dir={real} ;;", f"run_dir={placeholder} ;;")
    assert submitted == script


def test_27_twin_compare_json_and_resume_of_a_complete_sweep_agree(pbs_on, tmp_path, capsys):
    """Row 27: a complete sweep: `--json`, `sweep compare` (text and `--json`) give the same
    states; `--resume --dry-run` says there is nothing to run, and `--resume` submits nothing."""
    command = ["--", "bash", "-c", 'exit "$2"', "v"]
    assert main([*SWEEP, "--vary=--code=0,0", "--wait", "--json", *command]) == 0
    said = json.loads(capsys.readouterr().out)
    assert said["states"] == {"0": "COMPLETED", "1": "COMPLETED"}
    assert [(r["variant"], r["state"]) for r in said["comparison"]] == [
        (0, "COMPLETED"), (1, "COMPLETED")]  # fmt: skip
    sweep_dir = Path(said["sweep_dir"])
    assert main(["sweep", "compare", str(sweep_dir), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == said["comparison"]
    assert main(["sweep", "compare", str(sweep_dir)]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:2] == ["--code", "state"] and table[1].split() == ["variant"]
    assert [row.split()[:3] for row in table[2:]] == [["0", "0", "COMPLETED"],
                                                      ["1", "0", "COMPLETED"]]  # fmt: skip
    assert main(["sweep", "--resume", str(sweep_dir), "--dry-run"]) == 0
    assert capsys.readouterr().out == (
        f"sweep {sweep_dir}: every variant completed or is still going; nothing to run\n"
    )
    assert main(["sweep", "--resume", str(sweep_dir)]) == 0  # no job submitted, states kept
    assert capsys.readouterr().out.splitlines() == [
        f"sweep {sweep_dir}", "    0 COMPLETED  --code=0", "    1 COMPLETED  --code=0"]  # fmt: skip
    assert main(["sweep", "--resume", str(sweep_dir), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert (again["states"], again["job_ids"]) == (said["states"], [])
    assert len(pbs_on.events("qsub")) == 1  # the sweep's own array, nothing since


# Each variant runs `bash -c FIXABLE v --code WORD`: WORD 0 or 2 ends 0; f1 or f3 exits 3 until
# the test's file `fixed` exists.
FIXABLE = '[ "${{2#f}}" = "$2" ] || [ -e {folder}/fixed ] || exit 3'


def test_28_twin_resume_of_variants_1_and_3_asks_j_1_3_and_index_2_runs_nothing(pbs_on, tmp_path,
                                                                               capsys):  # fmt: skip
    """Row 28: variants 1 and 3 failed, 0 and 2 completed; `--resume` asks `-J 1-3` (PBS
    takes a range): `M[1..3]` F, 0, where index 2 prints that there is no variant to run (it
    completed before); 0 and 2 keep their runs, 1 and 3 keep their earlier ones."""
    words = ["--", "bash", "-c", FIXABLE.format(folder=tmp_path), "v"]
    assert main([*SWEEP, "--vary=--code=0,f1,2,f3", "--wait", *words]) == 1
    sweep_dir = Path(capsys.readouterr().out.splitlines()[0].removeprefix("sweep "))
    first = json.loads((sweep_dir / "sweep.json").read_text())["variants"]
    assert [e["state"] for e in first] == ["COMPLETED", "FAILED", "COMPLETED", "FAILED"]
    (tmp_path / "fixed").touch()
    assert main(["sweep", "--resume", str(sweep_dir), "--wait"]) == 0
    lines = capsys.readouterr().out.splitlines()
    parent = lines[1].split("submitted job: ")[1].split(" ")[0]
    assert [line.split()[:2] for line in lines[2:6]] == [
        ["0", "COMPLETED"], ["1", "COMPLETED"], ["2", "COMPLETED"], ["3", "COMPLETED"]]  # fmt: skip
    script = (sweep_dir / "array-1.sh").read_text()
    assert "#PBS -J 1-3\n" in script
    assert [line.split(")")[0].strip() for line in script.splitlines()
            if re.match(r"    \d\) run_dir=", line)] == ["1", "3"]  # fmt: skip
    assert ended_subjobs(parent, (1, 2, 3)) == [("F", 92, 0)] * 3
    (out,) = sweep_dir.glob(f"*.o{parent.split('[')[0]}.2")
    assert out.read_text() == "array index 2: no variant to run (it completed before)\n"
    again = json.loads((sweep_dir / "sweep.json").read_text())["variants"]
    assert [e["run_dir"] for e in again][0::2] == [e["run_dir"] for e in first][0::2]
    for old, new in zip(first[1::2], again[1::2], strict=True):
        assert new["run_dir"] != old["run_dir"] and new["earlier_runs"] == [old["run_dir"]]
        kept = json.loads((sweep_dir / old["run_dir"] / "manifest.json").read_text())
        assert (kept["state"], kept["exit_code"]) == ("FAILED", 3)


@pytest.fixture
def in_turn(tmp_path, monkeypatch, isolated_runs, capsys):
    """History on, a queue that takes one job a user: a sweep runs its variants in turn."""
    twin = build(tmp_path, monkeypatch, history=True, max_queued=1)
    capsys.readouterr()
    return twin


def test_23_42_twin_explain_of_a_job_running_variants_in_turn_lists_each(in_turn, tmp_path,
                                                                        capsys):  # fmt: skip
    """Rows 23 and 42: one job, variants exit 0, 3, 0; PBS: F, Exit_status 1, "... and
    failed". explain of the job's id lists the three variants and the job's own word."""
    code, out, sweep_dir = sweep_cli(tmp_path, capsys, "0,3,0", "--wait")
    assert code == 1
    job_id = out.splitlines()[1].split("submitted job: ")[1].split(" ")[0]
    assert out.splitlines()[1] == (f"  submitted job: {job_id} (hpcprof-kit sweep cancel "
                                   f"{sweep_dir} ends every variant)")  # fmt: skip
    assert main(["explain", job_id]) == 0
    said = capsys.readouterr().out
    print(said)
    lines = said.splitlines()
    assert lines[0] == (
        f"job {job_id} runs 3 variants of sweep {sweep_dir} in turn, one after another:"
    )
    states = [line.split()[2:5] for line in lines[1:4]]
    assert states == [["COMPLETED", "exit", "code"], ["FAILED", "exit", "code"],
                      ["COMPLETED", "exit", "code"]]  # fmt: skip
    assert [line.split()[5] for line in lines[1:4]] == ["0", "3", "0"]
    assert lines[4].startswith("  the job's own word: job_state F, Exit_status 1 (Job run at ")
    assert lines[4].endswith(" and failed)")
    assert lines[-1] == (
        f"  what to do: hpcprof-kit explain RUN_DIR for one variant; "
        f"hpcprof-kit sweep --resume {sweep_dir} runs the 1 that did not "
        "complete again"
    )


def test_twin_runs_lists_a_sweeps_variants_under_it(pbs_on, tmp_path, capsys):
    """cases.md's smaller defects: `runs` left out every sweep variant."""
    code, _, sweep_dir = sweep_cli(tmp_path, capsys, "0,3", "--wait")
    assert code == 1
    assert main(["runs"]) == 0
    out = capsys.readouterr().out
    print(out)
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(f"{sweep_dir.name}/ "))
    parent = first_variant(sweep_dir)["array_job_id"]
    assert lines[at].split() == [f"{sweep_dir.name}/", "pbs", parent, "sweep:", "1",
                                 "COMPLETED,", "1", "FAILED", "-"]  # fmt: skip
    variants = [line.split() for line in lines[at + 1 : at + 3]]
    assert [v[0].split("/")[0] for v in variants] == [sweep_dir.name] * 2
    assert [(v[1], v[3], v[4]) for v in variants] == [("pbs", "COMPLETED", "0"),
                                                      ("pbs", "FAILED", "3")]  # fmt: skip


@pytest.mark.parametrize("history", ["on", "off"])
def test_31_twin_sweep_cancel_ends_every_variant_of_the_array(history, request, tmp_path, capsys):
    """Row 31 through the kit: `sweep cancel DIR` deletes the array once (`qdel 'N[]'`):
    the finished variant stays COMPLETED (its own record), the running one is cancelled, the
    queued ones never ran."""
    twin = request.getfixturevalue(f"pbs_{history}")
    code, out, sweep_dir = sweep_cli(tmp_path, capsys, "0,hang,hang,hang")
    assert code == 0
    gate_on(tmp_path / "started-hang")
    assert main(["sweep", "cancel", str(sweep_dir)]) == 0
    out = capsys.readouterr().out
    print(out)
    lines = out.splitlines()
    assert lines[0] == f"sweep {sweep_dir}"
    assert [line.split()[:2] for line in lines[1:]] == [
        ["0", "COMPLETED"],
        ["1", "CANCELLED"],
        ["2", "CANCELLED"],
        ["3", "CANCELLED"],
    ]
    (deleted,) = [e["job_id"] for e in twin.events("qdel")]  # the array, once
    assert re.fullmatch(r"\d+\[\]\.pbshost-pbs-twin", deleted)
    runs = sorted(p for p in sweep_dir.iterdir() if (p / "manifest.json").exists())
    notes = [json.loads((p / "manifest.json").read_text()).get("note") for p in runs]
    assert notes[2:] == ["cancelled by the kit before it ran"] * 2
    assert not (runs[2] / "stdout").exists() and not (runs[3] / "stdout").exists()


def test_43_44_twin_sweep_cancel_of_variants_in_turn_deletes_the_shared_job(in_turn, tmp_path,
                                                                            capsys):  # fmt: skip
    """Rows 43 and 44 through `sweep cancel`: the variant running is cancelled, the ones
    waiting for their turn are passed over (CANCELLED before it ran); one qdel of the job."""
    code, out, sweep_dir = sweep_cli(tmp_path, capsys, "0,hang,hang")
    assert code == 0
    gate_on(tmp_path / "started-hang")
    assert main(["sweep", "cancel", str(sweep_dir)]) == 0
    out = capsys.readouterr().out
    print(out)
    assert [line.split()[:2] for line in out.splitlines()[1:]] == [
        ["0", "COMPLETED"],
        ["1", "CANCELLED"],
        ["2", "CANCELLED"],
    ]
    (deleted,) = [e["job_id"] for e in in_turn.events("qdel")]
    assert re.fullmatch(r"\d+\.pbshost-pbs-twin", deleted)


# ---- the site record checked before submitting ----------------------------------------------
@pytest.fixture
def with_closed(tmp_path, monkeypatch, isolated_runs, capsys):
    twin = build(tmp_path, monkeypatch, history=True, closed=True)
    capsys.readouterr()
    return twin


def test_01_twin_site_init_records_the_closed_queue_and_no_filesystems(with_closed, tmp_path):
    """Row 1: `closed` disabled, the server has no filesystems resource: the record says both
    in fields the kit checks, not only in comments."""
    rec = load_system("pbshost")
    assert rec.extra["queue_rules"]["closed"]["enabled"] is False
    assert "enabled" not in rec.extra["queue_rules"].get("workq", {})
    assert rec.extra["valid_filesystems"] == []


def test_50_twin_a_disabled_queue_is_refused_before_qsub(with_closed, tmp_path, capsys):
    """Row 50: the server refuses it at qsub (`Queue is not enabled`, exit 173); the record
    knew, so the kit refuses it first, naming the field, the value, the record and the fix."""
    code = main(["submit", "--system", "pbshost", "--backend", "pbs", "--queue", "closed",
                 "--ranks-per-node", "1", "--walltime", "00:05:00", "--binding", "none",
                 "--", "true"])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    record = load_system("pbshost").source
    assert err.strip() == (
        "hpcprof-kit submit: queue 'closed': pbshost's record says it takes no jobs now "
        f"(enabled = false under [queue_rules.closed] in {record}, from the scheduler at site "
        "init), and qsub would refuse it (Queue is not enabled); pick another queue (workq), or "
        "run site init again once the site has enabled it"
    )
    assert [e for e in with_closed.events("qsub")] == []
    done = subprocess.run(["qsub", "-q", "closed", "-l", "walltime=00:05:00", "-l",
                           "select=1:ncpus=2", "/dev/null"], capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert (done.returncode, done.stderr.strip()) == (173, "qsub: Queue is not enabled")


def test_56_twin_filesystems_the_server_does_not_take_are_refused_before_qsub(
    with_closed, tmp_path, capsys
):
    """Row 56: `qsub: Unknown resource Resource_List.filesystems`, exit 187, on a server with
    no such resource; the record says so, and the kit refuses it first."""
    code = main(["submit", "--system", "pbshost", "--backend", "pbs", "--filesystems", "home",
                 "--ranks-per-node", "1", "--walltime", "00:05:00", "--binding", "none",
                 "--", "true"])  # fmt: skip
    assert code == 2
    record = load_system("pbshost").source
    assert capsys.readouterr().err.strip() == (
        "hpcprof-kit submit: filesystems 'home': 'home' is not a file system of pbshost "
        f"(valid_filesystems in {record}: its server defines no 'filesystems' resource), and "
        "qsub would refuse it (Unknown resource); leave --filesystems (filesystems=) out"
    )
    assert [e for e in with_closed.events("qsub")] == []


def test_48_twin_a_sweep_of_3_in_a_queue_of_2_queued_jobs_is_refused_before_qsub(
    tmp_path, monkeypatch, isolated_runs, capsys
):
    """Row 48: queue `short` (5 min, 1 node, 2 queued jobs a user): the record says
    `max_jobs_per_user = 2`, `max_array_size = 2`; a sweep of 3 would be an array of 3, which
    the server refuses (exit 38): the kit refuses it first, naming the field, the value, the
    limit and the fix; nothing is submitted or written."""
    short = {"max_nodes": 1, "max_walltime": "00:05:00", "max_queued": 2}
    twin = build(tmp_path, monkeypatch, history=True, queues={"short": short})
    capsys.readouterr()
    rec = load_system("pbshost")
    assert rec.extra["queue_rules"]["short"] == {"max_jobs_per_user": 2, "max_array_size": 2}
    code = main([*SWEEP, "--queue", "short", "--vary=--code=0,0,0", "--", "bash", "-c",
                 'exit "$2"', "v"])  # fmt: skip
    assert code == 2
    assert capsys.readouterr().err.strip() == (
        "hpcprof-kit sweep: the grid has 3 variants, more than pbshost's array limit of 2 (pbs: "
        f"max_jobs_per_user = 2 under [queue_rules.short] in {rec.source}, and an array of N "
        "counts as N queued jobs); vary fewer values or split the grid into sweeps of at most 2"
    )
    assert twin.events("qsub") == []
    assert not isolated_runs.exists()


def test_49_twin_max_queued_set_after_site_init_2_refuses_the_sweep_1_runs_it_in_turn(
    pbs_on, tmp_path, capsys
):
    """Row 49: `max_queued` set on workq after site init, so the record does not say it and
    the server does (`qstat -Qf workq`). 2: a sweep of 3 is refused before qsub with the
    server's words; 1: the sweep runs as one job, the variants in turn, and says why."""
    assert "workq" not in load_system("pbshost").extra["queue_rules"]
    set_queue(pbs_on, "workq", max_queued=2)
    sweep = [*SWEEP, "--vary=--code=0,2,0"]
    command = ["--", "bash", "-c", 'exit "$2"', "v"]
    assert main([*sweep, *command]) == 2
    assert capsys.readouterr().err.strip() == (
        "hpcprof-kit sweep: the grid has 3 variants, more than pbshost's array limit of 2 (pbs: "
        "the server says max_queued = [u:PBS_GENERIC=2] (qstat -Qf workq), and PBS counts an "
        "array of N as N queued jobs); vary fewer values or split the grid into sweeps of at "
        "most 2"
    )
    assert pbs_on.events("qsub") == []
    set_queue(pbs_on, "workq", max_queued=1)
    why = ("# (the server says max_queued = [u:PBS_GENERIC=1] (qstat -Qf workq); the system "
           "record does not say.)\n")  # fmt: skip
    assert main([*sweep, "--dry-run", *command]) == 0
    preview = capsys.readouterr().out
    assert preview.splitlines()[0] == (
        "sweep of bash on pbshost: 3 variants, one PBS job running them in turn (qsub)"
    )
    assert why in preview
    assert main([*sweep, "--wait", *command]) == 1
    lines = capsys.readouterr().out.splitlines()
    sweep_dir = Path(lines[0].removeprefix("sweep "))
    job_id = lines[1].split("submitted job: ")[1].split(" ")[0]
    assert re.fullmatch(r"\d+\.pbshost-pbs-twin", job_id)  # one job, no array
    assert [line.split()[:2] for line in lines[2:5]] == [
        ["0", "COMPLETED"], ["1", "FAILED"], ["2", "COMPLETED"]]  # fmt: skip
    script = (sweep_dir / "array.sh").read_text()
    assert why in script and "#PBS -J" not in script and "for run_dir in" in script
    assert [e["ok"] for e in pbs_on.events("qsub")] == [True]


def test_52_twin_server_down_sweep_prints_no_limits_warning_before_the_real_error(
    pbs_on, tmp_path, capsys
):
    """Row 52: qsub exit 162 is relayed; no max_queued warning advising a record edit first."""
    pbs_on.set_server_down(True)
    code = main([*SWEEP, "--vary=--code=0,1", "--", "bash", "-c", "exit $2", "v"])
    err = capsys.readouterr().err
    assert code != 0
    assert "warning" not in err and "max_jobs_per_user" not in err
    assert "Connection refused" in err and "exit 162" in err


# ---- the record, and plain jobs with it -------------------------------------------------------
def test_02_twin_site_init_history_unset_is_false(pbs_off):
    """Row 2: `job_history_enable` not set (the twin's server prints no line): false."""
    assert load_system("pbshost").extra["cluster"]["job_history"] is False


def test_03_twin_a_job_with_the_record_asks_no_account_and_no_filesystems(pbs_on):
    """Row 3: qsub takes it; the script has no -A and no filesystems, the queue and select."""
    job = job_of(["true"])
    script = (job.run_dir / "job.sh").read_text()
    assert "#PBS -A" not in script and "filesystems" not in script
    assert "#PBS -q workq\n" in script and "select=1:ncpus=2" in script
    assert job.wait(timeout=120, progress=False) == "COMPLETED"


# Inside the job: the record load_system finds, and the folder it found it in, written to
# loaded.txt in the run directory.
LOADS = ("import os; from hpcprof_kit.systems import load_system; rec = load_system('pbshost'); "
         "open(os.path.join(os.environ['HPCPROF_RUN_DIR'], 'loaded.txt'), 'w').write("
         "rec.name + ' ' + rec.folder)")  # fmt: skip


def test_04_twin_the_record_is_found_inside_a_plain_job_and_an_array_variant(pbs_on, tmp_path,
                                                                             capsys):  # fmt: skip
    """Row 4: PBS starts each job with its own variables only; job.sh exports
    HPCPROF_SYSTEMS_DIR (the record's folder), so `load_system("pbshost")` works inside a plain
    job and inside each variant of an array."""
    records = str(tmp_path / "records")
    job = job_of(["python3", "-c", LOADS])
    assert job.wait(timeout=120, progress=False) == "COMPLETED"
    assert f"export HPCPROF_SYSTEMS_DIR={records}\n" in (job.run_dir / "job.sh").read_text()
    assert (job.run_dir / "loaded.txt").read_text() == f"pbshost {records}"
    assert main([*SWEEP, "--vary=--x=1,2", "--wait", "--", "python3", "-c", LOADS]) == 0
    sweep_dir = Path(capsys.readouterr().out.splitlines()[0].removeprefix("sweep "))
    assert "#PBS -J 0-1\n" in (sweep_dir / "array.sh").read_text()
    runs = sorted(p for p in sweep_dir.iterdir() if (p / "manifest.json").exists())
    assert [(r / "loaded.txt").read_text() for r in runs] == [f"pbshost {records}"] * 2
    started = pbs_on.events("job_start")
    assert len(started) == 3  # the job, then the array's two subjobs
    assert all("HPCPROF_SYSTEMS_DIR" not in e["env"] and "PBS_JOBID" in e["env"]
               for e in started)  # fmt: skip


@pytest.mark.parametrize("history", ["on", "off"])
def test_51_twin_server_down_status_keeps_the_last_state_and_says_why(history, request,
                                                                      tmp_path, capsys):  # fmt: skip
    """Row 51: `Connection refused ... (errno=15010)`: the last state stays, with a note."""
    twin = request.getfixturevalue(f"pbs_{history}")
    job = job_of(running(tmp_path, f"until [ -e {tmp_path / 'go'} ]; do sleep 0.1; done"))
    gate_on(tmp_path / "started")
    assert job.refresh() == "RUNNING"
    twin.set_server_down(True)
    assert main(["status", str(job.run_dir)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"RUNNING  job {job.job_id}  exit code None"
    assert out[1].startswith("note: scheduler not answering since ")
    assert "Connection refused" in out[1] and "errno=15010" in out[1]
    twin.set_server_down(False)
    (tmp_path / "go").touch()
    assert job.wait(timeout=120, progress=False) == "COMPLETED"


def test_47_twin_a_queue_limit_hit_is_relayed_and_status_says_never_submitted(tmp_path,
        monkeypatch, isolated_runs, capsys):  # fmt: skip
    """Row 47: the 2nd job in a queue that takes one a user: `qsub: would exceed queue
    generic's per-user limit`, exit 38; status: "never submitted: qsub refused it (exit 38)"."""
    twin = build(tmp_path, monkeypatch, history=True, max_queued=1)
    twin.set_scheduling(False)
    first = job_of(["true"])
    capsys.readouterr()
    argv = ["submit", "--system", "pbshost", "--backend", "pbs", "--ranks-per-node", "1",
            "--walltime", "00:05:00", "--binding", "none", "--", "true"]  # fmt: skip
    assert main(argv) != 0
    captured = capsys.readouterr()
    assert "qsub: would exceed queue generic's per-user limit" in captured.err
    run = next(p for p in isolated_runs.iterdir() if p != first.run_dir and p.is_dir())
    assert main(["status", str(run)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == ["FAILED  never submitted: qsub refused it (exit 38)", "qsub said:",
                         "  qsub: would exceed queue generic's per-user limit"]  # fmt: skip
    twin.set_scheduling(True)
    assert first.wait(timeout=120, progress=False) == "COMPLETED"


# ---- an array's subjobs deleted one by one, and a kit cancel of one variant --------------------
@pytest.mark.parametrize("history", ["on", "off"])
def test_32_33_34_35_38_39_40_twin_deleting_one_subjob_ends_only_that_variant(history, request,
                                                                             tmp_path, capsys):  # fmt: skip
    """Rows 32 and 38 (qdel of the running subjob: history on X 91 271: CANCELLED 271; off:
    X Exit_status 1: FAILED 143, cause unknown), 33 and 38 (a queued subjob: NOT_STARTED),
    34, 35, 39 and 40 (the kit's cancel of one queued / one running variant: CANCELLED, 143
    with history off, not PBS's placeholder 1); the others run on."""
    twin = request.getfixturevalue(f"pbs_{history}")
    code, out, sweep_dir = sweep_cli(tmp_path, capsys, "hang,2,3,hang,5,6")
    assert code == 0
    parent = out.splitlines()[1].split("submitted job: ")[1].split(" ")[0]
    runs = sorted(p for p in sweep_dir.iterdir() if (p / "manifest.json").exists())
    gate_on(tmp_path / "started-hang")  # subjob 0 runs
    qdel(twin, parent.replace("[]", "[1]"))  # queued, by hand
    assert main(["cancel", str(runs[2])]) == 0  # queued, by the kit
    qdel(twin, parent.replace("[]", "[0]"))  # running, by hand
    gate_on(runs[3] / "stdout")  # subjob 3 runs (it hangs): 1 and 2 were passed over
    assert main(["cancel", str(runs[3])]) == 0  # running, by the kit
    capsys.readouterr()
    from hpcprof_kit.jobs.sweep import Sweep

    states = Sweep.load(sweep_dir).wait(timeout=120)
    codes = [json.loads((r / "manifest.json").read_text()).get("exit_code") for r in runs]
    deleted_by_hand = ("CANCELLED", 271) if history == "on" else ("FAILED", 143)
    assert (states[0], codes[0]) == deleted_by_hand
    assert (states[1], codes[1]) == ("NOT_STARTED", None)
    assert (states[2], codes[2]) == ("CANCELLED", None)
    assert (states[3], codes[3]) == ("CANCELLED", 271 if history == "on" else 143)
    assert [states[4], states[5], codes[4], codes[5]] == ["FAILED", "FAILED", 5, 6]
    if history == "off":
        assert json.loads((runs[0] / "manifest.json").read_text())["note"] == UNKNOWN_CAUSE


@pytest.mark.parametrize("history", ["on", "off"])
def test_36_41_twin_array_exit_3_and_walltime_subjobs(history, request, tmp_path, capsys):
    """Rows 36 and 41: subjob 0 exits 3, subjob 1 outlives its walltime (PBS's line in the
    array's .e file). History on: FAILED 3, TIMEOUT -29; off: FAILED 3 (no array deletion
    blamed for PBS's placeholder Exit_status 1), TIMEOUT from PBS's stderr line."""
    request.getfixturevalue(f"pbs_{history}")
    code, _, sweep_dir = sweep_cli(tmp_path, capsys, "3,hang", "--walltime", "00:00:02",
                                   "--wait")  # fmt: skip
    assert code == 1
    runs = sorted(p for p in sweep_dir.iterdir() if (p / "manifest.json").exists())
    first, second = (json.loads((r / "manifest.json").read_text()) for r in runs)
    assert (first["state"], first["exit_code"]) == ("FAILED", 3)
    assert "deleted" not in first.get("note", "")
    assert (second["state"], second["exit_code"]) == ("TIMEOUT", -29 if history == "on" else 143)
    assert main(["explain", str(runs[1])]) == 0
    said = capsys.readouterr().out.splitlines()
    assert said[-1] == (f"  what to do: the walltime ran out before the variant ended: run the "
                        "sweep's unfinished variants again with a longer walltime (hpcprof-kit "
                        f"sweep --resume {sweep_dir} --walltime HH:MM:SS)")  # fmt: skip


def test_06_twin_submit_wait_explains_a_failure_with_its_late_stderr(tmp_path, monkeypatch,
                                                                    isolated_runs, capsys):  # fmt: skip
    """Row 6: the server shows the job ended with the comment from its start and no stderr
    for a while (here 2 s), then stages the stderr and writes "... and failed". `submit
    --wait` must explain the failure with both, not "stderr is empty"."""
    build(tmp_path, monkeypatch, history=True, stage_delay_s=2.0)
    capsys.readouterr()
    code = main(["submit", "--system", "pbshost", "--backend", "pbs", "--ranks-per-node", "1",
                 "--walltime", "00:05:00", "--binding", "none", "--wait", "--", "bash", "-c",
                 "echo 'sl.sh: exiting with 3' >&2; exit 3"])  # fmt: skip
    assert code == 1
    out = capsys.readouterr().out.splitlines()
    assert "state: FAILED (exit code 3)" in out
    assert "    | sl.sh: exiting with 3" in out and "  stderr is empty" not in out
    reason = next(line for line in out if line.startswith("  scheduler's reason: "))
    assert reason.endswith(" and failed")


NOT_RUNNING = "Not Running: Not enough free nodes available"


def test_10_twin_a_job_waiting_for_the_node_deleted_reads_as_ended_not_waiting(
    tmp_path, monkeypatch, isolated_runs, capsys
):
    """Row 10: a job waits while another holds the node ("Not Running: Not enough free nodes
    available"); qdel'ed, the server says F, 91, no Exit_status, "... and terminated": the kit
    says CANCELLED before it ran, and reads that comment as ended, not as waiting."""
    build(tmp_path, monkeypatch, history=True, exclusive=True)
    capsys.readouterr()
    first = job_of(running(tmp_path, f"until [ -e {tmp_path / 'go'} ]; do sleep 0.1; done"))
    gate_on(tmp_path / "started")
    try:
        second_waits(tmp_path, capsys)
    finally:
        (tmp_path / "go").touch()  # the first job ends, whatever happened above
    assert first.wait(timeout=120, progress=False) == "COMPLETED"


def second_waits(tmp_path, capsys) -> None:
    """Row 10's second job: it waits for the node, is deleted, and reads as ended."""
    second = job_of(["true"])
    told, last = _until(lambda: (attributes(second.job_id) or {}).get("comment"),
                        lambda c: c == NOT_RUNNING, 120, interval=0.05)  # fmt: skip
    assert told, last
    assert second.refresh() == "QUEUED"
    qdel(None, second.job_id)
    assert second.wait(timeout=120, progress=False) == "CANCELLED"
    assert (second.exit_code, second.manifest["comment"]) == (
        None, f"{NOT_RUNNING} and terminated")  # fmt: skip
    assert main(["explain", str(second.run_dir)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert (
        f"  scheduler's reason: {NOT_RUNNING} and terminated (ended: the job was deleted "
        "(qdel) before it ran)"
    ) in out
    assert not any("(waiting: the comment names what it waits for)" in line for line in out)
    assert out[0] == f"job {second.job_id} ended CANCELLED"


# ---- a sweep of two fields, and a sweep whose widest variant can never run ---------------------
# Each variant runs `bash -c TRAIN v --epochs E --seed S`, which, as the train example's own
# argument checks did on the real server, exits 2 unless it has at least one epoch and an
# integer seed (E=0 or S=x: exit 2).
TRAIN = ('[ "$2" -ge 1 ] && [ "$4" -eq "$4" ] 2>/dev/null || '
         '{ echo "train: error: argument --epochs/--seed: invalid value" >&2; exit 2; }')  # fmt: skip


def test_29_twin_a_2x2_train_like_sweep_three_of_four_exit_2(pbs_on, tmp_path, capsys):
    """Row 29: `--epochs=0,1` x `--seed=0,x`: `60[0,1,3]` F 93 Exit_status 2, `60[2]` 0:
    FAILED/FAILED/COMPLETED/FAILED, the same in `sweep compare --json`, exit 1."""
    code = main([*SWEEP, "--vary=--epochs=0,1", "--vary=--seed=0,x", "--wait", "--", "bash",
                 "-c", TRAIN, "v"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 1
    lines = out.splitlines()
    sweep_dir = Path(lines[0].removeprefix("sweep "))
    assert lines[2:7] == [
        "    0 FAILED     --epochs=0 --seed=0",
        "    1 FAILED     --epochs=0 --seed=x",
        "    2 COMPLETED  --epochs=1 --seed=0",
        "    3 FAILED     --epochs=1 --seed=x",
        f"  3 variant(s) did not complete; run it again with --resume {sweep_dir}",
    ]
    runs = sorted(p for p in sweep_dir.iterdir() if (p / "manifest.json").exists())
    codes = [json.loads((r / "manifest.json").read_text())["exit_code"] for r in runs]
    assert codes == [2, 2, 0, 2]
    assert "train: error: argument" in (runs[0] / "stderr").read_text()
    assert main(["sweep", "compare", str(sweep_dir), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["variant"], r["--epochs"], r["--seed"], r["state"]) for r in rows] == [
        (0, "0", "0", "FAILED"), (1, "0", "x", "FAILED"), (2, "1", "0", "COMPLETED"),
        (3, "1", "x", "FAILED")]  # fmt: skip


def test_30_twin_a_sweep_over_nodes_1_2_can_never_run_on_one_node(pbs_on, tmp_path, capsys):
    """Row 30: `--vary nodes=1,2` on the one-node server: every element of a PBS array asks
    the widest select (2 nodes), so both subjobs stay Q, "Can Never Run"; both are reported
    and the wait ends at once with exit 3."""
    code = main([*SWEEP, "--vary", "nodes=1,2", "--wait", "--", "true"])
    assert code == 3
    lines = capsys.readouterr().out.splitlines()
    sweep_dir = lines[0].removeprefix("sweep ")
    parent = lines[1].split("submitted job: ")[1].split(" ")[0]
    assert "select=2:" in (Path(sweep_dir) / "array.sh").read_text()
    assert lines[2:] == [
        "    0 QUEUED     nodes=1",
        "    1 QUEUED     nodes=2",
        f"  variant 0 can never run as asked; the scheduler says: {CNR}",
        f"  variant 1 can never run as asked; the scheduler says: {CNR}",
        "  waiting will not help: cancel its job (hpcprof-kit cancel RUN_DIR), change the "
        "request (fewer --nodes, a shorter --walltime, another --queue) and sweep again",
    ]
    for index in (0, 1):
        attrs = attributes(parent.replace("[]", f"[{index}]"))
        assert (attrs["job_state"], attrs["comment"]) == ("Q", CNR)
    qdel(pbs_on, parent)


def test_37_twin_qdel_of_the_array_by_hand_history_off(pbs_off, tmp_path, capsys):
    """Row 37: `qdel 'N[]'` by hand while [0] has finished, [1] runs, [2] and [3] are queued;
    once the array has ended the server knows none of them. The array ended while 2 and 3 had
    never started, which only its deletion does: COMPLETED / CANCELLED 143 (the note says
    why) / NOT_STARTED x2."""
    code, out, sweep_dir = sweep_cli(tmp_path, capsys, "0,hang,hang,hang")
    assert code == 0
    parent = out.splitlines()[1].split("submitted job: ")[1].split(" ")[0]
    runs = sorted(p for p in sweep_dir.iterdir() if (p / "manifest.json").exists())
    gate_on(tmp_path / "started-hang")  # subjob 1 runs; subjob 0 has ended
    qdel(pbs_off, parent)
    gone, last = _until(lambda: attributes(parent), lambda a: a is None, 120, interval=0.05)
    assert gone, f"{parent} still known: {last}"  # the array has ended, and is forgotten
    from hpcprof_kit.jobs.sweep import Sweep

    states = Sweep.load(sweep_dir).wait(timeout=120)
    manifests = [json.loads((r / "manifest.json").read_text()) for r in runs]
    assert [(states[i], m.get("exit_code")) for i, m in enumerate(manifests)] == [
        ("COMPLETED", 0), ("CANCELLED", 143), ("NOT_STARTED", None), ("NOT_STARTED", None)]  # fmt: skip
    note = (
        "deleted (qdel) with its array while it ran: job_end.json: killed by signal 15 "
        "(SIGTERM); PBS kept no record of it (no job history), but the array ended before "
        "variants 2, 3 ever started, which only a deletion of the array does (a walltime or "
        "the program's own exit ends one subjob, not the ones queued after it)"
    )
    assert manifests[1]["note"] == note
    assert not (runs[2] / "stdout").exists() and not (runs[3] / "stdout").exists()
    assert main(["status", str(runs[1])]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == [f"CANCELLED  job {manifests[1]['job_id']}  exit code 143", f"note: {note}"]


# ---- variants in turn, history off --------------------------------------------------------------
@pytest.fixture
def in_turn_off(tmp_path, monkeypatch, isolated_runs, capsys):
    """History off, a queue that takes one job a user: a sweep runs its variants in turn."""
    twin = build(tmp_path, monkeypatch, history=False, max_queued=1)
    capsys.readouterr()
    return twin


def test_45_twin_in_turn_skip_then_qdel_by_hand_history_off(in_turn_off, tmp_path, capsys):
    """Row 45: variant 0 runs, 2 is skipped with the kit's cancel, then the job is deleted by
    hand; the server forgets it: CANCELLED 143 (the job ended while variant 1 had never
    started: only a deletion does that) / NOT_STARTED / CANCELLED (skipped)."""
    code, out, sweep_dir = sweep_cli(tmp_path, capsys, "hang,0,0")
    assert code == 0
    job_id = out.splitlines()[1].split("submitted job: ")[1].split(" ")[0]
    runs = sorted(p for p in sweep_dir.iterdir() if (p / "manifest.json").exists())
    gate_on(tmp_path / "started-hang")
    assert main(["cancel", str(runs[2])]) == 0  # waiting for its turn: skipped alone
    assert capsys.readouterr().out.strip() == "CANCELLED"
    qdel(in_turn_off, job_id)
    gate_on(runs[0] / "job_end.json")
    from hpcprof_kit.jobs.sweep import Sweep

    states = Sweep.load(sweep_dir).wait(timeout=120)
    manifests = [json.loads((r / "manifest.json").read_text()) for r in runs]
    assert attributes(job_id) is None  # forgotten: no job history
    assert [(states[i], m.get("exit_code")) for i, m in enumerate(manifests)] == [
        ("CANCELLED", 143), ("NOT_STARTED", None), ("CANCELLED", None)]  # fmt: skip
    assert manifests[0]["note"] == (
        "deleted (qdel) with the job running it in turn: job_end.json: killed by signal 15 "
        "(SIGTERM); PBS kept no record of it (no job history), but the job ended before "
        "variant 1 ever started, which only a deletion of the job does (the program's own "
        "exit leaves the later variants to run, and the walltime leaves its line in the job's "
        "stderr)"
    )
    assert manifests[2]["note"] == "cancelled before its turn: the job passes this variant over"
    assert not (runs[1] / "stdout").exists() and not (runs[2] / "stdout").exists()


def test_46_twin_in_turn_walltime_during_variant_1_history_off(in_turn_off, tmp_path, capsys):
    """Row 46: the job's walltime runs out during variant 1; the server forgets the job and
    PBS's line `=>> PBS: job killed: walltime N exceeded limit M` lies in the job's stderr
    file: COMPLETED / TIMEOUT / NOT_STARTED."""
    code, out, sweep_dir = sweep_cli(tmp_path, capsys, "0,hang,0", "--walltime", "00:00:02",
                                     "--wait")  # fmt: skip
    assert code == 1
    job_id = out.splitlines()[1].split("submitted job: ")[1].split(" ")[0]
    assert [line.split()[:2] for line in out.splitlines()[2:5]] == [
        ["0", "COMPLETED"], ["1", "TIMEOUT"], ["2", "NOT_STARTED"]]  # fmt: skip
    runs = sorted(p for p in sweep_dir.iterdir() if (p / "manifest.json").exists())
    manifests = [json.loads((r / "manifest.json").read_text()) for r in runs]
    assert [m.get("exit_code") for m in manifests] == [0, 143, None]
    (err,) = sweep_dir.glob(f"*.e{job_id.split('.')[0]}")
    line = re.search(r"=>> PBS: job killed: walltime \d+ exceeded limit 6", err.read_text())
    assert line, err.read_text()
    assert manifests[1]["note"] == f"PBS's walltime: its stderr says {line.group(0)!r}"
    assert attributes(job_id) is None


# ---- a submission the server refuses for its user ----------------------------------------------
def test_55_twin_qsub_as_root_bad_uid_is_relayed_and_status_says_never_submitted(
    tmp_path, monkeypatch, isolated_runs, capsys
):
    """Row 55: a real OpenPBS server refuses root's jobs: `qsub: Bad UID for job execution`,
    exit 175 (the twin refuses this test's own user, as it may run as root). The kit relays
    it; status says "never submitted: qsub refused it (exit 175)"; each try keeps its own
    run directory, with what it wrote."""
    twin = build(tmp_path, monkeypatch, history=True, refused_uids=(os.getuid(),))
    capsys.readouterr()
    argv = ["submit", "--system", "pbshost", "--backend", "pbs", "--ranks-per-node", "1",
            "--walltime", "00:05:00", "--binding", "none", "--", "true"]  # fmt: skip
    for _ in range(2):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("hpcprof-kit submit: qsub -o ") and err.endswith(
            " job.sh failed (exit 175) while trying to submit to PBS: qsub: Bad UID for job "
            "execution"
        )
    runs = sorted(p for p in isolated_runs.iterdir() if p.is_dir())
    assert len(runs) == 2
    for run in runs:
        assert (run / "job.sh").exists() and (run / "spec.json").exists()
        assert main(["status", str(run)]) == 0
        lines = capsys.readouterr().out.splitlines()
        assert lines[:3] == ["FAILED  never submitted: qsub refused it (exit 175)", "qsub said:",
                             "  qsub: Bad UID for job execution"]  # fmt: skip
    assert [(e["ok"], e["exit"]) for e in twin.events("qsub")] == [(False, 175)] * 2
    done = subprocess.run(["qsub", "-l", "walltime=00:05:00", "-l", "select=1:ncpus=2",
                           str(runs[0] / "job.sh")], capture_output=True, text=True,
                          timeout=60)  # fmt: skip
    assert (done.returncode, done.stderr.strip()) == (175, "qsub: Bad UID for job execution")


# ---- every row of cases.md --------------------------------------------------------------------
CASES_MD = Path(__file__).resolve().parents[2] / "shared" / "reference" / "openpbs" / "cases.md"


def test_every_row_of_cases_md_has_a_test_named_by_it():
    """Each row number of cases.md's table appears in the name of a test of this module
    (`test_29_...`, `test_32_33_..._40_...`)."""
    if not CASES_MD.exists():
        missing(f"{CASES_MD} is absent: the real server's cases are not here")
    rows = [int(n) for n in re.findall(r"^\| (\d+) \|", CASES_MD.read_text(), re.MULTILINE)]
    assert rows == list(range(1, len(rows) + 1)), rows
    names = re.findall(r"^def test_((?:\d\d_)+)", Path(__file__).read_text(), re.MULTILINE)
    named = {int(n) for name in names for n in name.split("_") if n}
    assert [row for row in rows if row not in named] == []
