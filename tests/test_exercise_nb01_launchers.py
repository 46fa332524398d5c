"""Notebook 01's check of the learner's ``my_devices.py`` reads each rank's line as every
launcher prints it: Hydra's ``[0] `` (``mpiexec -l``) or ``[proxy:0:0@host] ``, PALS's ``0: ``
(``mpiexec --label`` on Aurora, as the kit's rehearsal prints it), ``srun --label``'s ``0: ``
(padded to the widest rank), and two ranks' lines glued into one. A wrong script or a job that
did not finish still gets a "Not yet" that says what the check saw.

The launchers this machine has run for real (Hydra, and the site rehearsal's PALS); srun's
labels and a glued line are written as those launchers printed them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from hpcprof_kit.exercises.nb01 import check_my_devices
from hpcprof_kit.validate.answers import answer_my_devices

REPO = Path(__file__).resolve().parents[1]
RIGHT = "Correct - your script asks torch itself, and ranks {} each answered.\n"
CPU = "no xpu, no cuda: torch runs on the CPU (2 CPUs)"


def _my_devices(folder: Path, blank: str) -> Path:
    """The notebook's ``my_devices.py`` with its blank filled by ``blank``."""
    nb = nbformat.read(REPO / "notebooks" / "01_device_discovery.ipynb", as_version=4)
    cell = next(c.source for c in nb.cells if c.source.startswith("%%writefile my_devices.py"))
    script = folder / "my_devices.py"
    script.write_text(cell.split("\n", 1)[1].replace("count = None", blank))
    return script


def _run(folder: Path, stdout: str, ranks: int = 2) -> Path:
    """A run directory as a job leaves it: its spec and what the ranks printed."""
    run = folder / "run"
    run.mkdir()
    (run / "spec.json").write_text(json.dumps({"nodes": 1, "ranks_per_node": ranks}))
    (run / "stdout").write_text(stdout)
    return run


def _check(tmp_path, stdout: str, capsys, ranks: int = 2) -> tuple[bool, str]:
    script = _my_devices(tmp_path, answer_my_devices())
    ok = check_my_devices(script, _run(tmp_path, stdout, ranks))
    return ok, capsys.readouterr().out


@pytest.mark.mpi
@pytest.mark.parametrize(
    "label",
    [
        pytest.param(["-l"], id="hydra-l"),
        pytest.param(["-prepend-pattern", "[proxy:%g:%p@%h] "], id="hydra-proxy"),
        pytest.param(["-prepend-pattern", "%r: "], id="pals-label"),  # the rehearsal's PALS
    ],
)
def test_a_right_script_passes_under_each_label_hydra_prints(tmp_path, mpiexec, label, capsys):
    script = _my_devices(tmp_path, answer_my_devices())
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # as batch jobs often run Python
    done = subprocess.run([mpiexec, *label, "-n", "2", sys.executable, str(script)], env=env,
                          capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    assert check_my_devices(script, _run(tmp_path, done.stdout)) is True, done.stdout
    assert capsys.readouterr().out == RIGHT.format([0, 1])


@pytest.mark.parametrize(
    "stdout",
    [
        pytest.param(f"0: rank 0: {CPU}\n1: rank 1: {CPU}\n", id="pals-label"),
        pytest.param(f"1: rank 1: {CPU}\n0: rank 0: {CPU}0: \n", id="pals-label-trailing"),
        pytest.param(f"[0] rank 0: {CPU}\n[1] rank 1: {CPU}[1] \n", id="hydra-l"),
        pytest.param(f"rank 1: {CPU}rank 0: {CPU}\n\n", id="glued"),
        pytest.param(f"0: rank 1: {CPU}rank 0: {CPU}0: \n\n", id="glued-labelled"),
    ],
)
def test_a_right_script_passes_as_each_launcher_prints_it(tmp_path, stdout, capsys):
    assert _check(tmp_path, stdout, capsys) == (True, RIGHT.format([0, 1]))


def test_srun_pads_its_label_to_the_widest_rank(tmp_path, capsys):
    stdout = "".join(f"{r:>2}: rank {r}: {CPU}\n" for r in range(12))
    assert stdout.startswith(" 0: rank 0: ") and "\n11: rank 11: " in stdout
    assert _check(tmp_path, stdout, capsys, ranks=12) == (True, RIGHT.format(list(range(12))))


def test_every_device_a_rank_counts_prints_its_line(tmp_path, capsys):
    gpu = "{r}: rank {r}: torch.xpu:{i} of 2: Intel(R) Data Center GPU Max 1550, 64 GiB, 448 compute units\n"
    both = "".join(gpu.format(r=r, i=i) for r in (0, 1) for i in (0, 1))
    assert _check(tmp_path, both, capsys) == (True, RIGHT.format([0, 1]))
    # rank 1 said "of 2" and listed one device: lines of its output are missing
    tmp = tmp_path / "second"
    tmp.mkdir()
    short = both.replace(gpu.format(r=1, i=1), "")
    assert _check(tmp, short, capsys) == (
        False,
        "Not yet. Hint: rank 1 printed a line for devices [0] of 2: each device acc counts "
        "prints one line, all with the same count.\n",
    )


@pytest.mark.parametrize(
    ("stdout", "hint"),
    [
        pytest.param(f"0: rank 0: {CPU}0: \n", "ranks [0] printed a line, of 2: did the job "
                     "complete (wait_for(job))?", id="pals-rank-1-missing"),
        pytest.param(f"[1] rank 1: {CPU}[1] \n", "ranks [1] printed a line, of 2: did the job "
                     "complete (wait_for(job))?", id="hydra-rank-0-missing"),
        pytest.param("0: Traceback (most recent call last):\n1: Traceback\n", "ranks [] printed "
                     "a line, of 2: did the job complete (wait_for(job))? Its output starts with "
                     "'0: Traceback (most recent call last):'.", id="no-rank-line"),
        pytest.param("", "ranks [] printed a line, of 2: did the job complete (wait_for(job))? "
                     "Its output is empty.", id="empty"),
    ],
)  # fmt: skip
def test_a_job_missing_a_ranks_line_is_not_yet(tmp_path, stdout, hint, capsys):
    assert _check(tmp_path, stdout, capsys) == (False, f"Not yet. Hint: {hint}\n")


def test_a_script_with_its_blank_left_is_not_yet_whatever_the_job_printed(tmp_path, capsys):
    script = _my_devices(tmp_path, "count = None")
    ok = check_my_devices(script, _run(tmp_path, f"0: rank 0: {CPU}\n1: rank 1: {CPU}\n"))
    assert (ok, capsys.readouterr().out) == (
        False,
        "Not yet. Hint: my_devices.py never calls device_count: fill the blank (count = ...) "
        "with the call that counts the devices acc sees.\n",
    )
