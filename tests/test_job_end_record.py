"""The job's own end record (``job_end.json``) always names the signal that ended the job, or
says none came (``"signal": null``), whichever process the scheduler's SIGTERM reached first
(issue #25: under load, Slurm's SIGTERM reached the command before the script, the script
ended on the command's 143 before its TERM trap ran, and the record named no signal)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from hpcprof_kit.jobs import JobSpec
from hpcprof_kit.jobs.backends.outcome import read_job_end

from gates import read_line
from slurm_cluster import _until


def trap_block() -> str:
    """The record-keeping lines of a rendered job script, as every script has them."""
    text = JobSpec(system="local", example="train").render()
    start = text.index('hpcprof_signal=""')
    end = re.compile(r"^trap .+ HUP$", re.M).search(text, start).end()
    return "set -eo pipefail\n" + text[start:end] + "\n"


@pytest.mark.parametrize(
    ("body", "code", "sig"),
    [
        ("true", 0, None),
        ("exit 3", 3, None),
        # the command is killed by SIGTERM and the script never receives it: the script ends
        # on the command's 143 through set -e, before any TERM trap could run
        ("bash -c 'kill -TERM $$'", 143, 15),
        ("bash -c 'kill -KILL $$'", 137, 9),
        # the script itself gets SIGTERM: its trap names it
        ("kill -TERM $$; sleep 5", 143, 15),
    ],
)
def test_the_record_names_the_signal_or_says_none_came(tmp_path: Path, body, code, sig):
    script = tmp_path / "job.sh"
    script.write_text(trap_block() + body + "\n")
    done = subprocess.run(["bash", str(script)], cwd=tmp_path, timeout=30, check=False)
    assert done.returncode == code
    raw = json.loads((tmp_path / "job_end.json").read_text())
    assert "signal" in raw and raw["signal"] == sig  # null when none came
    record = read_job_end(tmp_path)
    assert (record.exit_code, record.signal) == (code, sig)


def test_a_second_sigterm_while_the_record_is_written_does_not_lose_it(tmp_path: Path):
    """The scheduler's SIGTERM reaches the script more than once (mpiexec and timeout forward
    it): one that lands while the EXIT trap writes the record must not end the shell first
    (seen under load: a cancelled job's record was missing). The record is a FIFO here, so the
    trap waits in its open() (Linux: wait_for_partner) until the test has sent that signal."""
    script = tmp_path / "job.sh"
    script.write_text(trap_block() + "exit 0\n")
    record = tmp_path / "job_end.json"
    os.mkfifo(record)
    shell = subprocess.Popen(["bash", str(script)], cwd=tmp_path)
    try:
        wchan = Path(f"/proc/{shell.pid}/wchan")
        reached, _ = _until(wchan.read_text, lambda s: s == "wait_for_partner", timeout=30)
        assert reached, "the script's EXIT trap never opened job_end.json"
        shell.send_signal(signal.SIGTERM)
        data = read_line(record, timeout=30)
        assert shell.wait(timeout=30) == 0
    finally:
        shell.kill()
    assert json.loads(data)["exit_code"] == 0


def test_a_sigterm_as_the_exit_trap_begins_does_not_lose_the_record(tmp_path: Path):
    """Seen on Slurm at the walltime: the step's task died first and srun ended on 143, so the
    script's EXIT trap began; the batch shell's own SIGTERM came before the trap wrote a word,
    and the TERM trap's exit ended the shell with no record (a signal timed at random after
    the command's end hits that window about once in a hundred runs here). This EXIT trap
    sends the signal itself, as its first command: the window, every time."""
    block = trap_block()
    exit_trap = re.search(r"^trap '?(.+?)'? EXIT$", block, re.M)
    assert exit_trap, "the script sets no EXIT trap"
    block = block.replace(exit_trap[0], f"trap 'kill -TERM $$; {exit_trap[1]}' EXIT")
    script = tmp_path / "job.sh"
    script.write_text(block + "bash -c 'exit 143'\n")
    done = subprocess.run(["bash", str(script)], cwd=tmp_path, timeout=30, check=False)
    assert done.returncode == 143
    record = read_job_end(tmp_path)
    assert record is not None, "the shell ended with no job_end.json"
    assert (record.exit_code, record.signal) == (143, 15)
