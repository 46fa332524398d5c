"""The ready scripts in ``jobs/`` are the same for everyone: no path of the machine that rendered
them (its venv, the kit's checkout, $HOME), and a header that says what they are. A site script
rendered away from the site names the site recipe's venv; on the site, the venv it runs from."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hpcprof_kit.jobs import JobSpec, submit, wait_for
from hpcprof_kit.jobs.catalog import catalog
from hpcprof_kit.jobs.environment import running_venv, shell_path
from hpcprof_kit.systems import load_system

REPO = Path(__file__).resolve().parents[1]
AURORA_VENV = load_system("aurora").extra["default_venv"]


def _local_paths() -> dict[str, str]:
    """The paths of this machine a script must not carry, by what they are."""
    paths = {"the kit's checkout": str(REPO), "$HOME": str(Path.home())}
    if running_venv():
        paths["the running venv"] = running_venv()
    # the same places as the filesystem resolves them (a symlinked venv or checkout)
    for what, path in list(paths.items()):
        paths[f"{what} (resolved)"] = os.path.realpath(path)
    return {what: path for what, path in paths.items() if path not in ("", "/")}


def _carried(text: str) -> list[str]:
    return [f"{what} {path}" for what, path in _local_paths().items() if path in text]


def test_no_ready_script_in_jobs_carries_a_path_of_this_machine():
    files = sorted(p for p in (REPO / "jobs").rglob("*") if p.is_file())
    assert len(files) >= 30, files  # every system x variant, not an empty folder
    found = {str(p.relative_to(REPO)): _carried(p.read_text()) for p in files}
    assert not {k: v for k, v in found.items() if v}, found


def test_ready_scripts_rendered_here_carry_no_path_of_this_machine(monkeypatch):
    monkeypatch.delenv("HPCPROF_SYSTEM", raising=False)
    found = {rel: _carried(text) for rel, text in catalog().items()}
    assert not {k: v for k, v in found.items() if v}, found


def _render_aurora(**env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k != "HPCPROF_SYSTEM"}
    done = subprocess.run(
        [sys.executable, "-m", "hpcprof_kit", "render", "--system", "aurora", "--account", "P"],
        env={**clean, **env}, capture_output=True, text=True, timeout=120, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def _venv_line(script: str) -> str:
    return next(line for line in script.splitlines() if line.startswith("HPCPROF_VENV="))


def test_render_for_aurora_away_from_aurora_names_the_site_recipes_venv():
    assert running_venv(), "this test renders from a venv (the one the kit's tests run in)"
    script = _render_aurora()
    assert _venv_line(script) == f"HPCPROF_VENV={shell_path(AURORA_VENV)}"
    assert not _carried(script), _carried(script)


def test_render_for_aurora_on_aurora_names_the_venv_it_runs_from():
    # the site recipe and its Jupyter kernel set HPCPROF_SYSTEM on a login node
    assert running_venv(), "this test renders from a venv (the one the kit's tests run in)"
    script = _render_aurora(HPCPROF_SYSTEM="aurora")
    assert _venv_line(script) == f"HPCPROF_VENV={shell_path(running_venv())}"


def test_a_ready_scripts_header_names_it_and_says_no_spec_goes_with_it():
    for rel, text in catalog().items():
        header = [line for line in text.splitlines()[:16] if line.startswith("# ")]
        assert (
            f"# Ready script jobs/{rel}, from `hpcprof-kit render --all jobs/` (no spec.json goes"
            in header
        ), rel
        assert "spec.json" not in text.replace("(no spec.json goes", ""), rel


@pytest.mark.mpi
def test_a_submitted_scripts_header_points_at_the_spec_json_beside_it():
    job = submit(JobSpec(system="local", command=["true"], ranks_per_node=1))
    assert wait_for(job, timeout=120, progress=False) == "COMPLETED", job.tail(stream="stderr")
    script = (job.run_dir / "job.sh").read_text()
    assert (
        "# Rendered by hpcprof-kit from a JobSpec (a run directory keeps it as spec.json)" in script
    )
    assert "Ready script" not in script
    assert JobSpec.from_json((job.run_dir / "spec.json").read_text()).command == ("true",)
