"""Instructor validation: real nbval runs, one pytest process per notebook."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from hpcprof_kit.cli import main
from hpcprof_kit.validate import DOCTOR_FIX, NotebookResult, results_table, validate
from hpcprof_kit.validate.batch import REPORT, read_report, validation_job_spec
from hpcprof_kit.validate.run import validate_notebook


def _notebook(path: Path, *cells: nbformat.NotebookNode) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = list(cells)
    nbformat.write(nb, path)
    return path


def _checked(source: str, stored: str) -> nbformat.NotebookNode:
    cell = nbformat.v4.new_code_cell(source)
    cell.execution_count = 1
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=stored)]
    return cell


@pytest.fixture
def three_notebooks(tmp_path: Path) -> Path:
    """A folder with a raising notebook, a drifted checked output, and a good one."""
    folder = tmp_path / "notebooks"
    folder.mkdir()
    code = nbformat.v4.new_code_cell
    _notebook(
        folder / "01_raises.ipynb", code("x = 1"), code("raise ValueError('ranks must be 2')")
    )
    _notebook(folder / "02_drifted.ipynb", _checked("# NBVAL_CHECK_OUTPUT\nprint(1 + 1)", "3\n"))
    _notebook(folder / "03_good.ipynb", _checked("# NBVAL_CHECK_OUTPUT\nprint(1 + 1)", "2\n"))
    return folder


def test_each_notebook_reported_and_the_others_still_run(three_notebooks, capsys):
    code = main(["validate", "--notebooks", str(three_notebooks), "--json"])
    out = capsys.readouterr()
    rows = json.loads(out.out)
    assert code == 1
    assert [(r["notebook"], r["result"], r["failing_cell"]) for r in rows] == [
        ("01_raises.ipynb", "failed", "Cell 1"),
        ("02_drifted.ipynb", "failed", "Cell 0"),
        ("03_good.ipynb", "passed", ""),
    ]
    assert rows[0]["error"] == "Cell execution caused an exception: ValueError: ranks must be 2"
    assert rows[1]["error"].startswith("Cell outputs differ: mismatch 'stdout'")
    assert "'3\\n' == '2\\n'" in rows[1]["error"]  # what was stored, what the run printed
    # progress lines go to stderr so stdout stays valid JSON
    assert "01_raises.ipynb: failed in" in out.err and "at Cell 1" in out.err


def test_table_lists_notebook_result_seconds_cell_error():
    table = results_table(
        [
            NotebookResult("00_quickstart.ipynb", "passed", 21.43),
            NotebookResult("04_x.ipynb", "failed", 3.0, "Cell 5", "KeyError: 'rank'"),
        ]
    )
    assert table.splitlines() == [
        "notebook             result  seconds  failing cell  error",
        "00_quickstart.ipynb  passed     21.4",
        "04_x.ipynb           failed      3.0  Cell 5        KeyError: 'rank'",
    ]


def test_a_hanging_notebook_is_stopped_and_named(tmp_path):
    code = nbformat.v4.new_code_cell
    nb = _notebook(tmp_path / "slow.ipynb", code("x = 1"), code("import time; time.sleep(3600)"))
    # 45 s per cell: room for a kernel that starts slowly on a loaded machine (Cell 0 must
    # pass); the hang in Cell 1 is stopped there, never waited out
    result = validate_notebook(nb, timeout=45)
    assert result.result == "timeout"
    assert result.failing_cell == "Cell 1"  # Cell 0 passed before the hang
    assert "timeout=45 s" in result.error and result.seconds < 3600


def test_missing_environment_gets_the_doctor_fix_not_a_traceback(tmp_path):
    # A bare interpreter with no pytest/nbval/ipykernel: what a learner has before `make env`.
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    nb = _notebook(tmp_path / "n.ipynb", nbformat.v4.new_code_cell("x = 1"))
    result = validate_notebook(nb, python=str(bare / "bin" / "python"))
    assert result.result == "no-env"
    assert result.error == f"pytest is not installed in this environment; fix: {DOCTOR_FIX}"
    assert "Traceback" not in result.error


def test_unknown_notebook_path_is_a_clear_error(tmp_path, capsys):
    assert main(["validate", "--notebooks", str(tmp_path / "nope.ipynb")]) == 2
    err = capsys.readouterr().err
    assert "notebooks:" in err and "nope.ipynb" in err and "is not a notebook file" in err


def test_empty_folder_names_the_fix(tmp_path):
    from hpcprof_kit.errors import SpecError

    with pytest.raises(SpecError, match="no .ipynb files found.*--notebooks"):
        validate([tmp_path])


def test_aurora_validation_job_script_standin_pbs(tmp_path):
    """The batch job `validate --system aurora` submits (PBS Pro cannot run here: render only)."""
    nb = _notebook(tmp_path / "00_quickstart.ipynb", nbformat.v4.new_code_cell("x = 1"))
    spec = validation_job_spec([nb], "aurora", account="MYPROJ", timeout=300)
    script = spec.render()
    assert "#PBS -A MYPROJ" in script
    assert "#PBS -l select=1" in script
    assert "#PBS -l walltime=01:00:00" in script
    assert "#PBS -N hpcprof-validate" in script
    assert script.rstrip().endswith(
        f"hpcprof-kit validate --notebooks {nb} --timeout 300 --report {REPORT}"
    )
    assert '--hostfile "$PBS_NODEFILE"' in script and "mpiexec -n 1 -ppn 1" in script


def test_report_written_by_the_job_reads_back(tmp_path, three_notebooks):
    report = tmp_path / "run" / REPORT
    code = main(
        ["validate", "--notebooks", str(three_notebooks / "03_good.ipynb"), "--report", str(report)]
    )
    assert code == 0
    results = read_report(report)
    assert [(r.notebook, r.result) for r in results] == [("03_good.ipynb", "passed")]
    assert results[0].seconds > 0


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        ("submitted at 2026-01-01T12:00:05.123+00:00", "submitted at DATETIME"),
        ("runs/train_local_N1_R2_20260101-120000-2/", "runs/train_local_N1_R2_YYYYmmdd-HHMMSS/"),
        ("epoch 1/1: 6 steps, loss 0.93, 1.76 s", "epoch 1/1: 6 steps, loss 0.93, DURATION"),
        ("step took 42.7 ms", "step took DURATION"),
        ("run dir /home/ana/kit/runs/train_x", "run dir RUNS/train_x"),
        ("wrote /tmp/hpcprof-runs-x/a.json", "wrote TMPPATH"),
        ("see /lus/flare/projects/p/kit/", "see PATH"),
        ("rank=0 host=x1921c0s3b0n0 device=cpu", "rank=0 host=HOST device=cpu"),
        ('"hosts": ["x1921c0s3b0n0"]', '"hosts": ["HOST"]'),
        ("worker pid 12345 exited", "worker pid=PID exited"),
        ("rendezvous 10.140.57.108:29500", "rendezvous ADDRESS"),
        ("MASTER_PORT=29500", "MASTER_PORT=PORT"),
        ("job 8123456.aurora-pbsadmin-01.hostmgmt.cm.aurora.alcf.anl.gov", "job JOBID"),
        ("Submitted batch job 42", "Submitted batch job JOBID"),
        (
            "   2  record               0  ProfilerStep#2",
            "   2  record               0  ProfilerStep#2",
        ),
    ],
)
def test_sanitize_file_hides_what_changes_between_runs(repo, line, shown):
    """The rules applied the way nbval applies them: in file order, to both sides."""
    import re

    from nbval.plugin import get_sanitize_patterns

    rules = get_sanitize_patterns((repo / "notebooks" / "nbval_sanitize.cfg").read_text())
    for regex, replace in rules:
        line = re.sub(regex, replace, line)
    assert line == shown


def test_validation_runs_as_a_batch_job_through_the_jobs_layer(three_notebooks):
    """The `--system` route end to end, with the real local backend standing in for PBS."""
    from hpcprof_kit.validate.batch import validate_as_job

    seen: list[str] = []
    notebooks = [three_notebooks / "01_raises.ipynb", three_notebooks / "03_good.ipynb"]
    results = validate_as_job(
        notebooks, system="local", timeout=120, on_result=lambda r: seen.append(r.notebook)
    )
    assert [(r.notebook, r.result, r.failing_cell) for r in results] == [
        ("01_raises.ipynb", "failed", "Cell 1"),
        ("03_good.ipynb", "passed", ""),
    ]
    assert seen == ["01_raises.ipynb", "03_good.ipynb"]


def test_batch_validation_without_an_account_is_refused_before_submitting(
    tmp_path, isolated_runs, capsys
):
    nb = _notebook(tmp_path / "00_quickstart.ipynb", nbformat.v4.new_code_cell("x = 1"))
    assert main(["validate", "--system", "aurora", "--notebooks", str(nb)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hpcprof-kit validate: ") and "account" in err
    assert not isolated_runs.exists() or not any(isolated_runs.iterdir())  # no run directory
