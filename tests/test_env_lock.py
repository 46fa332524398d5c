"""The environment is locked: env/local/constraints.txt names one exact version of every package
`make env` installs, and the environment running these tests holds exactly those."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from must_have import missing

REPO = Path(__file__).resolve().parents[1]
LOCK = REPO / "env" / "local" / "constraints.txt"


def _locked() -> dict[str, str]:
    pins = {}
    for line in LOCK.read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        match = re.fullmatch(r"([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9.+!-]+)", line)
        assert match, f"{LOCK.name}: {line!r} is not 'name==version'"
        pins[re.sub(r"[-_.]+", "-", match[1]).lower()] = match[2]
    return pins


def _locked_python() -> str:
    found = re.search(r"^# Python (\d+\.\d+)", LOCK.read_text(), re.M)
    assert found, f"{LOCK.name} does not say which Python it was resolved with"
    return found[1]


def test_the_lock_pins_the_libraries_the_analyses_depend_on():
    pins = _locked()
    for name in ("numpy", "pandas", "matplotlib", "msgspec", "torch", "nbval", "pytest"):
        assert name in pins, f"{name} is not pinned in {LOCK.name}"
    assert pins["torch"] == "2.13.0"


def test_every_requirement_of_pyproject_is_locked_within_its_range():
    """What pyproject.toml asks for (the base and the extras make env installs) is in the lock at
    a version its range allows: a raised minimum without a refreshed lock fails here."""
    import tomllib
    from packaging.requirements import Requirement

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    wanted = [*project["dependencies"], *extras["local"], *extras["lab"], *extras["test"]]
    pins, wrong = _locked(), []
    env = {"python_version": _locked_python()}
    for text in wanted:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        name = re.sub(r"[-_.]+", "-", req.name).lower()
        if name not in pins:
            wrong.append(f"{req}: not in {LOCK.name}")
        elif not req.specifier.contains(pins[name], prereleases=True):
            wrong.append(f"{req}: {LOCK.name} has {pins[name]}")
    assert not wrong, "refresh the lock (make lock clean-env test):\n" + "\n".join(wrong)


def test_this_environment_holds_the_locked_versions():
    here = "{}.{}".format(*sys.version_info[:2])
    if here != _locked_python():
        missing(f"{LOCK.name} was resolved for Python {_locked_python()}, this is {here}")
    wrong = []
    for name, version in _locked().items():
        try:
            have = metadata.version(name)
        except metadata.PackageNotFoundError:
            wrong.append(f"{name}: locked {version}, not installed")
            continue
        if have.split("+")[0] != version:
            wrong.append(f"{name}: locked {version}, installed {have}")
    assert not wrong, "rebuild the environment (make clean-env env):\n" + "\n".join(wrong)


def test_the_build_passes_the_lock_to_pip_for_its_python_only_standin_pip(tmp_path):
    """The recipe passes the lock to pip for the Python it was resolved with (stand-in python
    and pip: the command line is what is checked)."""
    for version, pinned in ((_locked_python(), True), ("3.9", False)):
        venv = tmp_path / f"venv{version}"
        (venv / "bin").mkdir(parents=True)
        fake = venv / "bin" / "python"
        fake.write_text(
            "#!/bin/sh\n"
            f'case "$*" in *version_info*) echo {version};; *"import torch"*) exit 1;;\n'
            f'  *"-m pip install"*) echo "$@" >{venv}/args;; esac\n'
        )
        fake.chmod(0o755)
        done = subprocess.run(
            ["bash", str(REPO / "env/local/build_venv.sh"), sys.executable, str(venv), "lab"],
            capture_output=True, text=True, cwd=REPO,
        )  # fmt: skip
        args = (venv / "args").read_text()
        assert ("-c env/local/constraints.txt" in args) is pinned, (version, args, done.stderr)
        if not pinned:
            assert "installing unpinned versions" in done.stderr
