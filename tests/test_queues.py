"""Queues the system record does not list: workshop reservations (R123456), queues only the
scheduler knows, queues a workshop file registers, and typos, which stay errors.

The scheduler's answers are sample outputs written from the PBS Professional formats
(``qstat -Qf``: a ``Queue: NAME`` header, indented ``name = value`` lines, long values wrapped
onto tab-indented lines; ``pbs_rstat -f``: a ``Resv ID: ID`` header, then ``name = value``
lines). The commands themselves are stand-ins on a temporary PATH."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import warnings

import pytest

from hpcprof_kit.cli import main
from hpcprof_kit.errors import KitWarning, SpecError
from hpcprof_kit.jobs import JobSpec
from hpcprof_kit.jobs.queues import (
    QueueLimits,
    parse_attributes,
    parse_pbs_rstat,
    parse_qstat_queue,
    resolve_queue,
    run_query,
    say_warnings_again,
)
from hpcprof_kit.systems import load_system

QSTAT_DEBUG = """\
Queue: debug
    queue_type = Execution
    Priority = 10
    total_jobs = 3
    state_count = Transit:0 Queued:1 Held:0 Waiting:0 Running:2 Exiting:0 Begun:0
    max_queued = [u:PBS_GENERIC=1]
    resources_max.walltime = 01:00:00
    resources_min.walltime = 00:05:00
    resources_max.nodect = 2
    resources_min.nodect = 1
    resources_default.walltime = 00:30:00
    comment = Debug queue: one job per user, at most 2 nodes and 1 hour; see the
\tsite documentation
    resources_assigned.nodect = 2
    enabled = True
    started = True

"""

QSTAT_WORKSHOP = """\
Queue: alcf_workshop
    queue_type = Execution
    resources_max.nodect = 16
    resources_min.nodect = 2
    resources_max.walltime = 4:00:00
    acl_user_enable = False
    enabled = True
    started = False
"""

RSTAT_R123456 = """\
Resv ID: R123456.aurora-pbs-0001
Reserve_Name = alcf_workshop
Reserve_Owner = admin@aurora-pbs-0001
reserve_type = 2
reserve_state = RESV_CONFIRMED
reserve_substate = 2
reserve_start = Tue Oct 14 09:00:00 2025
reserve_end = Tue Oct 14 17:00:00 2025
reserve_duration = 28800
queue = R123456
Resource_List.ncpus = 1664
Resource_List.nodect = 8
Resource_List.place = scatter:excl
Resource_List.select = 8:ncpus=208
Resource_List.walltime = 08:00:00
Authorized_Users = +
resv_nodes = (x4102c5s0b0n0:ncpus=208)+(x4102c5s1b0n0:ncpus=208)+(x4102c5s2b0n0:ncpus=208)+(x4102c5s3b0n0:ncpus=208)+(x4102c5s4b0n0:ncpus=208)+(x4102c5s5b0n0:ncpus=208)+(x4102c5s6b0n0:ncpus=208)+(x4102c5s7b0n0:ncpus=208)
server = aurora-pbs-0001

"""

# A standing reservation's occurrence: no Resource_List.nodect/walltime, only nodes and duration.
RSTAT_S77 = """\
Resv ID: S77.polaris-pbs-01
reserve_state = RESV_RUNNING
reserve_duration = 5400
queue = S77
resv_nodes = (x3001c0s7b0n0:ngpus=4:ncpus=64)+(x3001c0s7b1n0:ngpus=4:ncpus=64)+(x3001c0s7b0n0:ngpus=4:ncpus=64)
"""

R123456_WARNING = (
    "queue 'R123456' is not listed in aurora.toml; pbs_rstat -f R123456 describes it (1-8 nodes, "
    "walltime at most 08:00:00; reservation R123456.aurora-pbs-0001, RESV_CONFIRMED, start Tue "
    "Oct 14 09:00:00 2025, end Tue Oct 14 17:00:00 2025), so the job is checked against those "
    "limits"
)
DEBG_ERROR = (
    "queue 'debg' is not a queue of aurora (known: 'debug', 'debug-scaling', 'prod', "
    "'capacity'); pick one of them or add it to aurora.toml; for a workshop reservation pass "
    "its queue name as pbs_rstat shows it (R<digits>, e.g. R123456), or run where qstat can "
    "confirm the queue"
)


# ---- parsing ----------------------------------------------------------------------------------
def test_qstat_queue_limits_from_the_scheduler_text():
    assert parse_qstat_queue(QSTAT_DEBUG) == QueueLimits("debug", 1, 2, "01:00:00")
    assert parse_attributes(QSTAT_DEBUG)["comment"] == (
        "Debug queue: one job per user, at most 2 nodes and 1 hour; see the site documentation"
    )
    assert parse_qstat_queue(QSTAT_WORKSHOP) == QueueLimits(
        "alcf_workshop", 2, 16, "04:00:00", note="the queue is not started"
    )


def test_reservation_limits_from_pbs_rstat():
    assert parse_pbs_rstat(RSTAT_R123456) == QueueLimits(
        "R123456", 1, 8, "08:00:00",
        note="reservation R123456.aurora-pbs-0001, RESV_CONFIRMED, "
        "start Tue Oct 14 09:00:00 2025, end Tue Oct 14 17:00:00 2025",
    )  # fmt: skip
    # Without Resource_List: the distinct hosts of resv_nodes and reserve_duration (seconds).
    assert parse_pbs_rstat(RSTAT_S77) == QueueLimits(
        "S77", 1, 2, "01:30:00", note="reservation S77.polaris-pbs-01, RESV_RUNNING"
    )


@pytest.mark.parametrize(
    "text", ["", "qstat: Unknown queue\n", "pbs_rstat: Unknown Reservation Id"]
)
def test_text_that_describes_nothing_parses_to_none(text):
    assert parse_qstat_queue(text) is None and parse_pbs_rstat(text) is None


# ---- stand-in scheduler commands ----------------------------------------------------------------
@pytest.fixture
def scheduler_path(tmp_path, monkeypatch):
    """A PATH without any real scheduler command; ``install`` adds a stand-in."""
    bindir, tools = tmp_path / "bin", tmp_path / "tools"
    bindir.mkdir()
    tools.mkdir()
    # Only what the stand-ins need: CI installs Slurm's Torque wrappers (a qstat) in /usr/bin.
    for tool in ("bash", "cat"):
        (tools / tool).symlink_to(shutil.which(tool))
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{tools}")

    def install(name: str, answers: dict[str, str]) -> None:
        cases = "".join(
            f"  '{args}') cat <<'EOF'\n{text}EOF\n  ;;\n" for args, text in answers.items()
        )
        script = (
            '#!/bin/bash\ncase "$*" in\n'
            + cases
            + f"  *) echo '{name}: Unknown queue or reservation' >&2; exit 153 ;;\nesac\n"
        )
        (bindir / name).write_text(script)
        (bindir / name).chmod(0o755)

    return install


@pytest.fixture(autouse=True)
def fresh_warnings():
    """Each test starts in a process that has said no queue warning yet."""
    say_warnings_again()


@contextlib.contextmanager
def no_repeat():
    """Checking a queue whose warning was already said says nothing more (once per process)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", KitWarning)
        try:
            yield
        finally:
            assert [str(w.message) for w in caught if w.category is KitWarning] == []


def validate_with_warnings(spec: JobSpec) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", KitWarning)
        spec.validate()
    return [str(w.message) for w in caught if w.category is KitWarning]


def aurora(**fields) -> JobSpec:
    return JobSpec(system="aurora", account="P", ranks_per_node=12, **fields)


def test_reservation_known_to_standin_pbs_rstat_is_accepted_with_its_limits(scheduler_path):
    scheduler_path("pbs_rstat", {"-f R123456": RSTAT_R123456})
    assert validate_with_warnings(aurora(queue="R123456", nodes=8, walltime="08:00:00")) == [
        R123456_WARNING
    ]
    with pytest.raises(SpecError) as info, no_repeat():
        aurora(queue="R123456", nodes=9).validate()
    assert str(info.value) == (
        "nodes 9 is outside queue R123456's range 1-8 on aurora (pbs_rstat -f R123456); "
        "ask for 1-8 nodes or pick another queue"
    )
    with pytest.raises(SpecError) as info, no_repeat():
        aurora(queue="R123456", walltime="08:00:01").validate()
    assert str(info.value) == (
        "walltime 08:00:01 exceeds queue R123456's 08:00:00 on aurora (pbs_rstat -f R123456); "
        "ask for at most 08:00:00 or pick a queue with a longer limit"
    )


def test_workshop_named_queue_confirmed_by_standin_qstat(scheduler_path):
    scheduler_path("qstat", {"-Qf alcf_workshop": QSTAT_WORKSHOP})
    found = validate_with_warnings(aurora(queue="alcf_workshop", nodes=16))
    assert found == [
        "queue 'alcf_workshop' is not listed in aurora.toml; qstat -Qf alcf_workshop describes it "
        "(2-16 nodes, walltime at most 04:00:00; the queue is not started), so the job is checked "
        "against those limits"
    ]
    refused = r"^nodes 1 is outside queue alcf_workshop's range 2-16"
    with pytest.raises(SpecError, match=refused), no_repeat():
        aurora(queue="alcf_workshop", nodes=1).validate()


def test_reservation_no_scheduler_can_describe_gets_only_the_generic_checks(scheduler_path):
    found = validate_with_warnings(aurora(queue="R999", nodes=300, walltime="100:00:00"))
    assert found == [
        "queue 'R999' is not listed in aurora.toml; it is accepted as a reservation queue, but no "
        "scheduler command (pbs_rstat, qstat) is on PATH here to read its limits: only nodes >= 1 "
        "and the walltime format are checked, and the scheduler applies the reservation's own "
        "limits"
    ]
    with pytest.raises(SpecError) as info, no_repeat():
        aurora(queue="R999", nodes=0).validate()
    assert str(info.value) == (
        "nodes 0 is below queue R999's minimum 1 on aurora (no limits known); "
        "ask for at least 1 node(s)"
    )
    with (
        pytest.raises(SpecError, match=r"^walltime '8h' is not HH:MM:SS"),
        no_repeat(),
    ):
        aurora(queue="R999", walltime="8h").validate()


def test_reservation_the_standin_scheduler_does_not_know_is_accepted_with_that_said(
    scheduler_path,
):
    scheduler_path("pbs_rstat", {})
    scheduler_path("qstat", {})
    assert validate_with_warnings(aurora(queue="S12")) == [
        "queue 'S12' is not listed in aurora.toml; it is accepted as a reservation queue, but "
        "pbs_rstat -f S12 and qstat -Qf S12 did not describe it (is the reservation confirmed, "
        "and yours?): only nodes >= 1 and the walltime format are checked, and the scheduler "
        "applies the reservation's own limits"
    ]


@pytest.mark.parametrize("with_qstat", [False, True])
def test_a_typo_stays_an_error_listing_the_queues_and_how_to_use_a_reservation(
    scheduler_path, with_qstat
):
    if with_qstat:  # a standin qstat that knows no 'debg'
        scheduler_path("qstat", {"-Qf debug": QSTAT_DEBUG})
    with pytest.raises(SpecError) as info:
        aurora(queue="debg").validate()
    assert str(info.value) == DEBG_ERROR


def test_listed_queues_never_ask_the_scheduler(monkeypatch):
    def no_subprocess(*args, **kwargs):
        raise AssertionError(f"a listed queue ran {args}")

    monkeypatch.setattr(subprocess, "run", no_subprocess)
    assert resolve_queue(load_system("aurora"), "debug-scaling").max_nodes == 256
    # System.queue stays pure: it refuses an unlisted name without asking anyone.
    with pytest.raises(SpecError, match=r"^queue 'R123456' is not a queue of aurora"):
        load_system("aurora").queue("R123456")


def test_standin_scheduler_that_hangs_or_is_missing_cannot_say(scheduler_path, tmp_path):
    hang = tmp_path / "bin" / "qstat"
    hang.write_text("#!/bin/bash\nexec sleep 30\n")
    hang.chmod(0o755)
    assert run_query(["qstat", "-Qf", "debug"], timeout=0.2) is None
    assert run_query(["pbs_rstat", "-f", "R1"]) is None  # not on PATH


# ---- a reservation given with the spec (the workshop file's queue) ---------------------------
SCHOOL = {"nodes": 4, "walltime": "02:00:00"}


def test_a_reservation_given_with_the_spec_is_accepted_silently_with_its_limits(scheduler_path):
    assert validate_with_warnings(aurora(queue="hpcprof_school", nodes=4, reservation=SCHOOL)) == []
    with pytest.raises(SpecError) as info:
        aurora(queue="hpcprof_school", walltime="03:00:00", reservation=SCHOOL).validate()
    assert str(info.value) == (
        "walltime 03:00:00 exceeds queue hpcprof_school's 02:00:00 on aurora (the spec's "
        "reservation); ask for at most 02:00:00 or pick a queue with a longer limit"
    )
    with pytest.raises(SpecError) as info:
        aurora(queue="hpcprof_school", nodes=5, reservation=SCHOOL).validate()
    assert str(info.value) == (
        "nodes 5 is outside queue hpcprof_school's range 1-4 on aurora (the spec's reservation); "
        "ask for 1-4 nodes or pick another queue"
    )


def test_a_reservation_applies_to_its_own_queue_only_and_leaves_nothing_behind(scheduler_path):
    aurora(queue="hpcprof_school", reservation=SCHOOL).validate()
    # Nothing registered for the process: the next spec without it is refused as before.
    with pytest.raises(SpecError, match=r"^queue 'hpcprof_school' is not a queue of aurora"):
        aurora(queue="hpcprof_school").validate()


def test_a_reservations_own_limits_are_checked():
    with pytest.raises(SpecError, match=r"^walltime '2 hours' is not HH:MM:SS"):
        aurora(queue="R1", reservation={"walltime": "2 hours"}).validate()
    with pytest.raises(SpecError) as info:
        aurora(queue="R1", reservation={"nodes": 0}).validate()
    assert str(info.value) == (
        "reservation nodes 0 of queue 'R1' must be a whole number of at least 1"
    )
    with pytest.raises(SpecError) as info:
        aurora(queue="R1", reservation={"nodes": 2, "hours": 3}).validate()
    assert str(info.value) == (
        "reservation of queue 'R1' has unknown keys ['hours']; it takes 'nodes' (the most "
        "nodes) and 'walltime' (HH:MM:SS)"
    )
    with pytest.raises(SpecError) as info:
        aurora(reservation={"nodes": 2}).validate()
    assert str(info.value) == (
        "reservation {'nodes': 2} is given but queue is not: name the reservation's queue "
        "(queue='R123456'), or drop reservation"
    )


# ---- what a user sees on the command line ---------------------------------------------------------
def test_cli_render_with_a_reservation_warns_in_one_line(scheduler_path, capsys):
    code = main(["render", "--system", "aurora", "--account", "P", "--queue", "R999"])
    out, err = capsys.readouterr()
    assert code == 0 and "#PBS -q R999" in out.splitlines()
    assert err == (
        "hpcprof-kit render: warning: queue 'R999' is not listed in aurora.toml; it is accepted "
        "as a reservation queue, but no scheduler command (pbs_rstat, qstat) is on PATH here to "
        "read its limits: only nodes >= 1 and the walltime format are checked, and the "
        "scheduler applies the reservation's own limits\n"
    )


def test_cli_render_with_a_typo_is_one_error_line(scheduler_path, capsys):
    assert main(["render", "--system", "aurora", "--account", "P", "--queue", "debg"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"hpcprof-kit render: {DEBG_ERROR}\n"


def test_a_queue_warning_is_said_once_per_process(scheduler_path, capsys):
    spec = aurora(queue="R999")
    assert len(validate_with_warnings(spec)) == 1
    with no_repeat():  # validate, render and resolve check the queue again: nothing is repeated
        spec.validate()
        spec.render()
        aurora(queue="R999", nodes=2).validate()
    assert main(["render", "--system", "aurora", "--account", "P", "--queue", "R999"]) == 0
    assert capsys.readouterr().err == ""
    say_warnings_again()
    assert validate_with_warnings(spec) == [
        "queue 'R999' is not listed in aurora.toml; it is accepted as a reservation queue, but no "
        "scheduler command (pbs_rstat, qstat) is on PATH here to read its limits: only nodes >= 1 "
        "and the walltime format are checked, and the scheduler applies the reservation's own "
        "limits"
    ]
