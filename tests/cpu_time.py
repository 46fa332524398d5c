"""Where the suite's time goes: ``pytest --cpu-report=FILE`` writes, per test, its wall seconds
and the CPU seconds it used, its own and its finished subprocesses' (jobs, ranks, kernels).

On two cores the wall time of one test says little: it is whatever the other worker left it. The
CPU seconds add up: their sum over the run, divided by the cores, is the least wall time any
ordering can reach, and the files with the most are where a saving counts. Each xdist worker
writes its own ``FILE.<worker>.tsv``; ``python tests/cpu_time.py FILE`` adds them up per file
(or notebook) and prints the table.

rusage counts only subprocesses somebody waited for: a daemon reaped at exit, or a job a stand-in
scheduler starts in a session of its own, is missed. Where a cgroup v1 ``cpuacct`` hierarchy is
writable (root on Linux), each test also runs in a cgroup of its own, which every process it
starts is born into, orphans included: its CPU seconds, read when the worker ends, are the
``cgroup_cpu_s`` column, and the table adds those up instead. The table's last line says how much
of the machine's CPU the counted seconds account for.
"""

from __future__ import annotations

import os
import sys
import time
from collections import defaultdict
from contextlib import suppress
from pathlib import Path

import pytest

COLUMNS = ("nodeid", "wall_s", "self_cpu_s", "children_cpu_s")
CPUACCT = Path("/sys/fs/cgroup/cpuacct")  # cgroup v1; a v2-only machine keeps the rusage columns


def pytest_addoption(parser):
    parser.addoption(
        "--cpu-report",
        default=None,
        metavar="FILE",
        help="write each test's wall and CPU seconds to FILE.<worker>.tsv (tests/cpu_time.py)",
    )


def _busy() -> float:
    """CPU seconds the whole machine has spent busy since boot (/proc/stat, all cores)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    ticks = [int(f) for f in fields]
    idle = ticks[3] + ticks[4]  # idle, iowait
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _worker(config) -> str | None:
    """This process's xdist worker id; None in the controller or without xdist. From the
    config, not $PYTEST_XDIST_WORKER, which a pytest started inside a test inherits."""
    return getattr(config, "workerinput", {}).get("workerid")


class TestCgroups:
    """A cpuacct cgroup per test under ``hpcprof-tests/<worker>-<pid>/``; this process moves into
    each in turn, so what a test starts is born there and stays there."""

    def __init__(self, worker: str) -> None:
        self.root = CPUACCT / "hpcprof-tests" / f"{worker}-{os.getpid()}"
        self.tests: list[tuple[str, Path]] = []

    @classmethod
    def open(cls, worker: str) -> TestCgroups | None:
        try:
            groups = cls(worker)
            groups.root.mkdir(parents=True, exist_ok=True)
            (groups.root / "cgroup.procs").write_text(str(os.getpid()))
        except OSError:  # not Linux, not root, or no cpuacct hierarchy: rusage only
            return None
        return groups

    def enter(self, nodeid: str) -> None:
        group = self.root / str(len(self.tests))
        group.mkdir()
        (group / "cgroup.procs").write_text(str(os.getpid()))
        self.tests.append((nodeid, group))

    def seconds(self) -> list[tuple[str, float]]:
        """Each test's CPU seconds so far, its orphans' included."""
        return [(nodeid, int((g / "cpuacct.usage").read_text()) / 1e9) for nodeid, g in self.tests]

    def close(self) -> None:
        """Back to the hierarchy's top; the groups go, but for one a process still runs in."""
        (CPUACCT / "cgroup.procs").write_text(str(os.getpid()))
        for group in [g for _, g in self.tests] + [self.root]:
            with suppress(OSError):
                group.rmdir()


_GROUPS: dict[str, TestCgroups | None] = {}


def _groups(config) -> TestCgroups | None:
    worker = _worker(config) or "main"
    if worker not in _GROUPS:
        _GROUPS[worker] = TestCgroups.open(worker)
    return _GROUPS[worker]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    target = item.config.getoption("--cpu-report")
    if not target:
        yield
        return
    groups = _groups(item.config)
    if groups is not None:
        groups.enter(item.nodeid)
    before, start = os.times(), time.monotonic()
    yield
    after, wall = os.times(), time.monotonic() - start
    worker = _worker(item.config) or "main"
    path = Path(f"{target}.{worker}.tsv")
    new = not path.exists()
    with path.open("a") as out:
        if new:
            out.write("\t".join(COLUMNS) + "\n")
        own = (after.user - before.user) + (after.system - before.system)
        kids = (after.children_user - before.children_user) + (
            after.children_system - before.children_system
        )
        out.write(f"{item.nodeid}\t{wall:.2f}\t{own:.2f}\t{kids:.2f}\n")


def pytest_sessionstart(session):
    target = session.config.getoption("--cpu-report")
    if target and not _worker(session.config):
        Path(f"{target}.machine").write_text(f"{_busy():.2f}\t{time.monotonic():.2f}\n")


def pytest_sessionfinish(session):
    target = session.config.getoption("--cpu-report")
    if not target:
        return
    groups = _GROUPS.get(_worker(session.config) or "main")
    if groups is not None and groups.tests:
        worker = _worker(session.config) or "main"
        rows = "".join(f"{nodeid}\t{cpu:.2f}\n" for nodeid, cpu in groups.seconds())
        Path(f"{target}.{worker}.cgroup").write_text("nodeid\tcgroup_cpu_s\n" + rows)
        groups.close()
    if not _worker(session.config):
        with Path(f"{target}.machine").open("a") as out:
            out.write(f"{_busy():.2f}\t{time.monotonic():.2f}\n")


def summary(target: str, top: int = 40) -> str:
    """The per-file table of a run's ``--cpu-report`` files, most CPU first."""
    per_file: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0])
    folder, name = Path(target).parent, Path(target).name
    cgroup = {}  # nodeid -> CPU s of its cgroup, where the run had them
    for path in sorted(folder.glob(name + ".*.cgroup")):
        cgroup.update(ln.split("\t") for ln in path.read_text().splitlines()[1:])
    for path in sorted(folder.glob(name + ".*.tsv")):
        for line in path.read_text().splitlines()[1:]:
            nodeid, wall, own, kids = line.split("\t")
            row = per_file[nodeid.split("::")[0]]
            row[0] += float(wall)
            if nodeid in cgroup:  # every process the test started, in one number
                own, kids = cgroup[nodeid], 0.0
            row[1] += float(own)
            row[2] += float(kids)
            row[3] += 1
    rows = sorted(per_file.items(), key=lambda kv: -(kv[1][1] + kv[1][2]))
    total_cpu = sum(r[1] + r[2] for _, r in rows)
    # the file column fits the longest name shown, whole: a file named from outside the rootdir
    # (a test's own temporary folder) has a long path, and a cut one would match no file
    width = max([58] + [len(name) for name, _ in rows[:top]])
    lines = [f"{'file':{width}} {'tests':>5} {'wall s':>8} {'cpu s':>8} {'of cpu':>7}"]
    for name, (wall, own, kids, n) in rows[:top]:
        cpu = own + kids
        lines.append(f"{name:{width}} {n:5d} {wall:8.1f} {cpu:8.1f} {cpu / total_cpu:7.1%}")
    rest = rows[top:]
    if rest:
        cpu = sum(r[1] + r[2] for _, r in rest)
        more = f"({len(rest)} more files)"
        lines.append(f"{more:{width}} {'':5} {'':8} {cpu:8.1f} {cpu / total_cpu:7.1%}")
    how = "cgroups: every process a test started" if cgroup else "rusage: waited-for subprocesses"
    lines.append(f"{'total counted':{width}} {'':5} {'':8} {total_cpu:8.1f}  ({how})")
    machine = Path(f"{target}.machine")
    if machine.exists():  # the start line, and the end line once the run ended (else: now)
        marks = [tuple(map(float, ln.split())) for ln in machine.read_text().splitlines()]
        (busy0, t0), (busy1, t1) = marks[0], (marks[1:] or [(_busy(), time.monotonic())])[0]
        lines.append(
            f"machine busy during the run: {busy1 - busy0:.0f} CPU s over {t1 - t0:.0f} s wall "
            f"({(busy1 - busy0) / (t1 - t0):.2f} cores busy); counted above: "
            f"{total_cpu / (busy1 - busy0):.0%}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(summary(sys.argv[1], *(int(a) for a in sys.argv[2:3])))
