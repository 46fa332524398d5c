"""``pytest --cpu-report FILE`` (tests/cpu_time.py): each test's CPU seconds, its own and its
finished subprocesses', and the per-file table that says where the suite's time goes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cpu_time import CPUACCT, summary

from must_have import missing

# Each test burns a known amount of CPU (a loop on process_time, not a sleep).
BURN = """
import subprocess, sys, time

LOOP = "import time\\nt0 = time.process_time()\\nwhile time.process_time() - t0 < {s}: pass"


def test_burns_in_its_own_process():
    exec(LOOP.format(s=0.4))


def test_burns_in_a_subprocess():
    subprocess.run([sys.executable, "-c", LOOP.format(s=0.4)], check=True)


def test_does_nothing():
    pass
"""

# A job a stand-in scheduler starts: its own session, nobody waits for it. It writes to a FIFO
# when done, which the next test reads (so the run ends after it, with no sleep).
ORPHAN = """
import contextlib, os, select, subprocess, sys

LOOP = "import time\\nt0 = time.process_time()\\nwhile time.process_time() - t0 < 0.4: pass"
FIFO = os.environ["ORPHAN_FIFO"]


def test_starts_an_orphan():
    code = LOOP + f"\\nimport os\\nopen({FIFO!r}, 'w').write(str(os.getpid()))"
    subprocess.Popen([sys.executable, "-c", code], start_new_session=True)


def test_waits_for_it():
    pid = int(open(FIFO).read())
    # and for its exit (a pidfd turns readable then), so its cgroup is empty when the run ends
    with contextlib.suppress(ProcessLookupError):
        fd = os.pidfd_open(pid)
        select.select([fd], [], [], 60)
        os.close(fd)
"""


def test_each_tests_own_and_subprocess_cpu_is_counted_and_added_up_per_file(tmp_path, repo):
    # the filesystem's root as pytest's rootdir: the file is then named by its whole path,
    # longer than the table's narrowest file column wherever the temporary folder is (as
    # when a clone sits beside it and their common folder becomes the rootdir)
    (tmp_path / "test_burn.py").write_text(BURN)
    report = tmp_path / "cpu"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.cpu_time", "-p", "no:cacheprovider",
         "-p", "no:xdist", "-q", str(tmp_path / "test_burn.py"), "--cpu-report", str(report),
         "--rootdir", tmp_path.anchor],
        cwd=repo, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    lines = Path(f"{report}.main.tsv").read_text().splitlines()
    assert lines[0].split("\t") == ["nodeid", "wall_s", "self_cpu_s", "children_cpu_s"]
    rows = {ln.split("\t")[0].split("::")[1]: [float(v) for v in ln.split("\t")[1:]]
            for ln in lines[1:]}  # fmt: skip
    assert list(rows) == ["test_burns_in_its_own_process", "test_burns_in_a_subprocess",
                          "test_does_nothing"]  # fmt: skip
    own, child, idle = rows.values()
    assert own[1] >= 0.35 and own[2] < 0.35  # its own CPU (in clock ticks), none from children
    assert child[2] >= 0.35  # the subprocess's loop, counted once it was waited for
    assert idle[1] + idle[2] < 0.35

    table = summary(str(report)).splitlines()
    assert table[0].split() == ["file", "tests", "wall", "s", "cpu", "s", "of", "cpu"]
    (row,) = [ln for ln in table if ln.split()[0].endswith("/test_burn.py")]
    assert len(row.split()[0]) > 58  # named whole, not cut at the column's narrowest width
    assert row.split()[1] == "3" and float(row.split()[3]) >= 0.7
    assert table[-1].startswith("machine busy during the run:")


def test_a_job_nobody_waits_for_is_counted_in_the_cgroup_of_the_test_that_started_it(
    tmp_path, repo
):
    if not (CPUACCT / "cgroup.procs").exists() or not os.access(CPUACCT, os.W_OK):
        missing(f"a writable cgroup v1 cpuacct hierarchy at {CPUACCT} (Linux, as root)")
    (tmp_path / "test_orphan.py").write_text(ORPHAN)
    os.mkfifo(tmp_path / "fifo")
    report = tmp_path / "cpu"
    groups = CPUACCT / "hpcprof-tests"
    before = set(groups.glob("main-*"))  # another run's, if one is going on
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.cpu_time", "-p", "no:cacheprovider",
         "-p", "no:xdist", "-q", str(tmp_path / "test_orphan.py"), "--cpu-report", str(report)],
        cwd=repo, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, ORPHAN_FIFO=str(tmp_path / "fifo")),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    rusage = {ln.split("\t")[0].split("::")[1]: float(ln.split("\t")[3])
              for ln in Path(f"{report}.main.tsv").read_text().splitlines()[1:]}  # fmt: skip
    cgroup = {ln.split("\t")[0].split("::")[1]: float(ln.split("\t")[1])
              for ln in Path(f"{report}.main.cgroup").read_text().splitlines()[1:]}  # fmt: skip
    assert rusage["test_starts_an_orphan"] < 0.35  # never waited for: rusage misses it
    assert cgroup["test_starts_an_orphan"] >= 0.4  # born in the test's cgroup, counted there
    assert cgroup["test_waits_for_it"] < 0.35
    assert summary(str(report)).splitlines()[-2].endswith("(cgroups: every process a test started)")
    assert set(groups.glob("main-*")) <= before  # this run's groups were removed
