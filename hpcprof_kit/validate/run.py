"""Run nbval over notebooks, one pytest subprocess per notebook, and tabulate the verdicts."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from hpcprof_kit.errors import SpecError

# The one list of nbval options (`make test` reads it through nbval_args);
# the sanitize file beside the notebooks is added when it exists.
NBVAL_ARGS = ("--nbval-lax", "--nbval-current-env")
SANITIZE_FILE = "nbval_sanitize.cfg"


def nbval_args(folder: str | os.PathLike[str]) -> list[str]:
    """The nbval options for the notebooks in ``folder``.

    >>> nbval_args("notebooks")[:2]
    ['--nbval-lax', '--nbval-current-env']
    """
    sanitize = Path(folder) / SANITIZE_FILE
    return [*NBVAL_ARGS, *(["--nbval-sanitize-with", str(sanitize)] if sanitize.is_file() else [])]


DOCTOR_FIX = (
    "run `hpcprof-kit doctor` to see what is missing; the usual fix is "
    "`pip install -e '.[local,lab,test]'` in the kit's environment (or `make env`)"
)

# Output of a pytest run whose environment cannot run notebooks at all -> the doctor fix line.
_NO_ENV_SIGNS = {
    "No module named pytest": "pytest is not installed in this environment",
    "unrecognized arguments: --nbval": "nbval is not installed in this environment",
    "No module named 'ipykernel'": "ipykernel is not installed in this environment",
    "No module named ipykernel": "ipykernel is not installed in this environment",
    "NoSuchKernel": "no Jupyter kernel for this environment",
    "No such kernel": "no Jupyter kernel for this environment",
}
_ANSI = re.compile(r"(?:\x1b|#x1B)\[[0-9;]*m")
_CELL_REASON = re.compile(r"^Cell (\d+): (.+)$")
_EXC_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning)\b.*$")
_VERBOSE_PASS = re.compile(r"::Cell (\d+) PASSED")


@dataclass(frozen=True)
class NotebookResult:
    """The verdict on one notebook: ``result`` is passed, failed, timeout or no-env."""

    notebook: str
    result: str
    seconds: float
    failing_cell: str = ""  # nbval's numbering: "Cell N" counts code cells from 0
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.result == "passed"

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def find_notebooks(
    notebooks: Iterable[str | os.PathLike[str]] | None = None,
    folder: str | os.PathLike[str] = "notebooks",
) -> list[Path]:
    """The notebooks to validate: the given files (folders expand to their ``*.ipynb``), in order.

    >>> [p.name for p in find_notebooks(folder="notebooks")][:1]     # doctest: +SKIP
    ['00_quickstart.ipynb']
    """
    given = [Path(folder)] if notebooks is None else [Path(n) for n in notebooks]
    found: list[Path] = []
    for path in given:
        if path.is_dir():
            found.extend(
                sorted(p for p in path.glob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
            )
        elif path.suffix == ".ipynb" and path.is_file():
            found.append(path)
        else:
            raise SpecError(
                f"notebooks: {str(path)!r} is not a notebook file or a folder holding notebooks; "
                "give paths to existing .ipynb files (e.g. notebooks/00_quickstart.ipynb) "
                "or run from the kit's top folder"
            )
    if not found:
        raise SpecError(
            f"notebooks: no .ipynb files found in {', '.join(map(str, given))}; "
            "run from the kit's top folder or pass --notebooks FILE ..."
        )
    return found


def _clean(text: str) -> str:
    return _ANSI.sub("", text or "")


def _error_line(text: str) -> tuple[str, str]:
    """(cell, one-line error) from nbval's failure report."""
    lines = [line.rstrip() for line in _clean(text).splitlines()]
    cell, reason = "", ""
    for line in lines:
        match = _CELL_REASON.match(line.strip())
        if match:
            cell, reason = f"Cell {match.group(1)}", match.group(2)
            break
    exceptions = [line.strip() for line in lines if _EXC_LINE.match(line.strip())]
    if exceptions:
        detail = exceptions[-1]
        return cell, f"{reason}: {detail}" if reason else detail
    if reason:
        # Output mismatches: nbval lists the differing lines after the reason.
        # nbval lists what differs after the reason; the assert line reads "stored == now".
        what = [ln.strip() for ln in lines if ln.strip().startswith("mismatch")]
        after = lines[
            next((i for i, ln in enumerate(lines) if ln.strip().endswith("failed:")), len(lines)) :
        ]
        diff = [ln.strip() for ln in after[1:] if ln.strip()][:1]
        detail = "; ".join(what[:1] + [f"stored == now: {d}" for d in diff])
        return cell, f"{reason}: {detail}"[:200] if detail else reason
    nonblank = [ln.strip() for ln in lines if ln.strip()]
    return cell, nonblank[-1] if nonblank else "unknown failure (see the pytest output)"


def _from_junit(path: Path) -> tuple[bool, str, str]:
    """(passed, failing cell, error) from a JUnit report, first failure only."""
    root = ET.parse(path).getroot()
    for case in root.iter("testcase"):
        for tag in ("failure", "error"):
            node = case.find(tag)
            if node is not None:
                cell, error = _error_line(node.text or node.get("message", ""))
                name = case.get("name", "")
                return False, cell or (name if name.startswith("Cell") else ""), error
    return True, "", ""


def _no_env_reason(output: str) -> str | None:
    return next((why for sign, why in _NO_ENV_SIGNS.items() if sign in output), None)


def _notebook_env(runs_dir: str) -> dict[str, str]:
    env = dict(os.environ)
    env["KINETO_LOG_LEVEL"] = "6"  # Kineto's USDT stderr lines would break output comparison
    env.setdefault("HPCPROF_RUNS_DIR", runs_dir)  # notebook runs never land in the source tree
    env.pop("PYTEST_ADDOPTS", None)
    bin_dir = str(Path(sys.executable).parent)
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    return env


def validate_notebook(
    notebook: str | os.PathLike[str],
    *,
    timeout: float = 600.0,
    cell_timeout: float | None = None,
    python: str = sys.executable,
) -> NotebookResult:
    """Run one notebook under nbval in its own pytest process and return its verdict.

    >>> r = validate_notebook("notebooks/00_quickstart.ipynb")       # doctest: +SKIP
    >>> r.result, r.failing_cell                                      # doctest: +SKIP
    ('passed', '')
    """
    path = Path(notebook).resolve()
    with tempfile.TemporaryDirectory(prefix="hpcprof-validate-") as scratch:
        junit = Path(scratch) / "junit.xml"
        cmd = [python, "-m", "pytest", "-p", "no:cacheprovider", "-v", *nbval_args(path.parent)]
        if cell_timeout is not None:
            cmd += ["--nbval-cell-timeout", str(int(cell_timeout))]
        cmd += [f"--junitxml={junit}", str(path)]
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                cmd,
                cwd=path.parent.parent,  # the kit's top folder: its conftest sets the run env
                env=_notebook_env(str(Path(scratch) / "runs")),
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,  # so a timeout can stop the kernel too
            )
        except OSError as exc:
            return NotebookResult(path.name, "no-env", 0.0, "", f"{exc}; fix: {DOCTOR_FIX}")
        try:
            output, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            passed = [int(n) for n in _VERBOSE_PASS.findall(output)]
            cell = f"Cell {max(passed) + 1}" if passed else "Cell 0"
            return NotebookResult(
                path.name,
                "timeout",
                round(time.monotonic() - start, 1),
                cell,
                f"stopped after timeout={timeout:.0f} s; shorten the cell or raise --timeout",
            )
        seconds = round(time.monotonic() - start, 1)
        why = _no_env_reason(output)
        if why:
            return NotebookResult(path.name, "no-env", seconds, "", f"{why}; fix: {DOCTOR_FIX}")
        if not junit.is_file():
            tail = [ln for ln in _clean(output).splitlines() if ln.strip()][-1:] or ["no output"]
            return NotebookResult(
                path.name, "failed", seconds, "", f"pytest exited {proc.returncode}: {tail[0]}"
            )
        ok, cell, error = _from_junit(junit)
        if ok and proc.returncode != 0:
            ok, error = False, f"pytest exited {proc.returncode} with no failing cell"
        return NotebookResult(path.name, "passed" if ok else "failed", seconds, cell, error)


_HEADER = ("notebook", "result", "seconds", "failing cell", "error")


def results_table(results: Iterable[NotebookResult]) -> str:
    """A fixed-width text table: notebook, result, seconds, failing cell, error line.

    >>> print(results_table([NotebookResult("00_quickstart.ipynb", "passed", 21.4)]))
    notebook             result  seconds  failing cell  error
    00_quickstart.ipynb  passed     21.4
    """
    rows = [(r.notebook, r.result, f"{r.seconds:.1f}", r.failing_cell, r.error) for r in results]
    widths = [max(len(row[i]) for row in [_HEADER, *rows]) for i in range(4)]

    def line(row: tuple[str, ...]) -> str:
        cells = [row[0].ljust(widths[0]), row[1].ljust(widths[1]), row[2].rjust(widths[2])]
        cells += [row[3].ljust(widths[3]), row[4]]
        return "  ".join(cells).rstrip()

    return "\n".join(line(row) for row in [_HEADER, *rows])
