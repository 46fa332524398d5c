"""The ALCF recipes (env/aurora, env/polaris) agree with the system records and behave on
workshop day: pinned modules, a venv named after its module, ALCF's proxy for a venv built inside
a PBS job, the module a venv was built on, the kernel's proxy, and the Aurora tunnel route.

The site is played by stand-ins written here: ``module``/``conda`` shell functions, a site
``python3`` that makes a venv, and a venv ``python3`` that records each call (its arguments and
proxy variables) instead of running pip or ipykernel. The recipes themselves run for real.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hpcprof_kit.systems import load_system

REPO = Path(__file__).resolve().parents[1]
PROXY = "http://proxy.alcf.anl.gov:3128"
NO_PROXY = (
    "admin,polaris-adminvm-01,localhost,*.cm.polaris.alcf.anl.gov,polaris-*,"
    "*.polaris.alcf.anl.gov,*.alcf.anl.gov"
)
PROXY_VARS = ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "no_proxy")
ALCF_PROXY_ENV = {"http_proxy": PROXY, "https_proxy": PROXY, "HTTP_PROXY": PROXY,
                  "HTTPS_PROXY": PROXY, "no_proxy": NO_PROXY}  # fmt: skip
NO_PROXY_ENV = dict.fromkeys(PROXY_VARS)
SITE = {
    "aurora": ("frameworks/2025.3.1", "Python (hpcprof-kit, Aurora)"),
    "polaris": ("conda/2025-09-25", "Python (hpcprof-kit, Polaris)"),
}

# The venv's python3: one JSON line per call instead of pip / ipykernel.
VENV_PYTHON = f"""#!{sys.executable}
import json, os, sys
with open(os.environ["CALLS"], "a") as out:
    proxy = {{k: os.environ.get(k) for k in {PROXY_VARS!r}}}
    out.write(json.dumps({{"argv": sys.argv[1:], "proxy": proxy}}) + "\\n")
if sys.argv[1:3] == ["-m", "pip"] and os.environ.get("PIP_FAILS"):
    sys.exit("ERROR: Could not find a version that satisfies the requirement")
"""
# The site module's python3: it only has to make a venv.
SITE_PYTHON = f"""#!{sys.executable}
import os, shutil, sys
assert sys.argv[1:4] == ["-m", "venv", "--system-site-packages"], sys.argv
venv = sys.argv[4]
os.makedirs(f"{{venv}}/bin")
shutil.copy(os.environ["VENV_PYTHON"], f"{{venv}}/bin/python3")
with open(f"{{venv}}/bin/activate", "w") as out:
    out.write(f'export VIRTUAL_ENV="{{venv}}"\\nexport PATH="{{venv}}/bin:$PATH"\\n')
"""
# Lmod and conda as the recipes see them: `module load X` appends X to LOADEDMODULES.
SHELL = """
module() {
  echo "module $*" >>"$MODULES_LOG"
  if [ "$1" = load ]; then export LOADEDMODULES="${LOADEDMODULES:+$LOADEDMODULES:}$2"; fi
}
conda() { echo "conda $*" >>"$MODULES_LOG"; }
source "$1" || exit 3
echo "after: VIRTUAL_ENV=$VIRTUAL_ENV HPCPROF_SYSTEM=$HPCPROF_SYSTEM http_proxy=${http_proxy-unset}"
"""


def _write_exe(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


class Site:
    """A login or compute node of an ALCF system, played in ``tmp_path``."""

    def __init__(self, tmp_path: Path, system: str):
        self.system = system
        self.home = tmp_path / "home"
        self.home.mkdir()
        self.calls = tmp_path / "calls.jsonl"
        self.modules_log = tmp_path / "modules.log"
        self.venv_python = _write_exe(tmp_path / "standin" / "venv-python3", VENV_PYTHON)
        self.bin = tmp_path / "site-bin"
        _write_exe(self.bin / "python3", SITE_PYTHON)

    @property
    def default_venv(self) -> Path:
        record = load_system(self.system).extra["default_venv"]
        return Path(record.replace("$HOME", str(self.home)))

    def make_venv(self, venv: Path, built_on: str | None) -> None:
        """A venv as an earlier run of the recipe left it."""
        subprocess.run([str(self.bin / "python3"), "-m", "venv", "--system-site-packages",
                        str(venv)], check=True, env=self.env())  # fmt: skip
        if built_on:
            (venv / "hpcprof-site-module").write_text(f"{built_on}\n")

    def env(self, **extra: str) -> dict[str, str]:
        return {"PATH": f"{self.bin}:/usr/bin:/bin", "HOME": str(self.home), "USER": "alice",
                "CALLS": str(self.calls), "MODULES_LOG": str(self.modules_log),
                "VENV_PYTHON": str(self.venv_python), **extra}  # fmt: skip

    def source_setup(self, **extra: str) -> subprocess.CompletedProcess:
        script = REPO / "env" / self.system / "setup.sh"
        return subprocess.run(["bash", "-c", SHELL, "_", str(script)], capture_output=True,
                              text=True, env=self.env(**extra), timeout=60)  # fmt: skip

    def recorded(self) -> list[dict]:
        if not self.calls.exists():
            return []
        return [json.loads(line) for line in self.calls.read_text().splitlines()]

    def call(self, *argv_start: str) -> dict:
        found = [c for c in self.recorded() if c["argv"][: len(argv_start)] == list(argv_start)]
        assert len(found) == 1, (argv_start, self.recorded())
        return found[0]


# ---- the scripts and the records cannot drift -------------------------------------------------


@pytest.mark.parametrize("system", ["aurora", "polaris"])
def test_setup_script_runs_each_setup_line_of_the_record(system):
    text = (REPO / "env" / system / "setup.sh").read_text()
    commands = [line.split(" || ")[0].strip() for line in text.splitlines()
                if line.strip() and not line.lstrip().startswith("#")]  # fmt: skip
    setup = list(load_system(system).setup_lines)
    assert setup and [c for c in commands if c in setup] == setup


@pytest.mark.parametrize("system", ["aurora", "polaris"])
def test_setup_script_default_venv_is_the_records(system):
    default = load_system(system).extra["default_venv"]
    text = (REPO / "env" / system / "setup.sh").read_text()
    assert f'"${{HPCPROF_VENV:-${{workshop_venv:-{default}}}}}"' in text


@pytest.mark.parametrize("system", ["aurora", "polaris"])
def test_the_workshop_files_venv_is_used_unless_hpcprof_venv_says_otherwise(tmp_path, system):
    site = Site(tmp_path, system)
    ws = tmp_path / "workshop.toml"
    class_venv = tmp_path / "project" / "class-venv"
    ws.write_text(f'[workshop]\nsystem = "{system}"\nvenv = "{class_venv}"\n')
    result = site.source_setup(HPCPROF_WORKSHOP=str(ws))
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1].startswith(f"after: VIRTUAL_ENV={class_venv} ")
    mine = tmp_path / "mine"
    result = site.source_setup(HPCPROF_WORKSHOP=str(ws), HPCPROF_VENV=str(mine))
    assert result.stdout.splitlines()[-1].startswith(f"after: VIRTUAL_ENV={mine} ")


@pytest.mark.parametrize("system", ["aurora", "polaris"])
def test_kernel_display_name_is_one_string_in_script_and_readme(system):
    module, display = SITE[system]
    text = (REPO / "env" / system / "setup.sh").read_text()
    assert f'"{display}" || return 1' in text
    assert display in (REPO / "env" / "README.md").read_text()
    assert load_system(system).extra["default_venv"].endswith(module.replace("/", "-"))


# ---- building and reusing the venv ------------------------------------------------------------


@pytest.mark.parametrize("system", ["aurora", "polaris"])
def test_login_node_build_needs_no_proxy_and_records_the_module(tmp_path, system):
    site = Site(tmp_path, system)
    module, display = SITE[system]
    result = site.source_setup()
    assert result.returncode == 0, result.stderr
    venv = site.default_venv
    assert result.stdout.splitlines()[-1] == (
        f"after: VIRTUAL_ENV={venv} HPCPROF_SYSTEM={system} http_proxy=unset"
    )
    assert "proxy" not in "".join(result.stdout.splitlines(keepends=True)[:-1])
    pip = site.call("-m", "pip", "install")
    assert pip["argv"][-1] == f"{REPO}[lab]" and pip["proxy"] == NO_PROXY_ENV
    assert (venv / "hpcprof-site-module").read_text() == f"{module}\n"
    kernel = site.call("-m", "ipykernel", "install")
    assert kernel["argv"][:7] == ["-m", "ipykernel", "install", "--user", "--name",
                                  "hpcprof-kit", "--display-name"]  # fmt: skip
    assert kernel["argv"][7] == display


def test_polaris_loads_its_modules_in_the_records_order(tmp_path):
    site = Site(tmp_path, "polaris")
    assert site.source_setup().returncode == 0
    assert site.modules_log.read_text().splitlines() == list(load_system("polaris").setup_lines)


@pytest.mark.parametrize("system", ["aurora", "polaris"])
def test_build_inside_a_pbs_job_goes_through_the_alcf_proxy(tmp_path, system):
    site = Site(tmp_path, system)
    result = site.source_setup(PBS_JOBID="8123.aurora-pbs-0001")
    assert result.returncode == 0, result.stderr
    said = [line for line in result.stdout.splitlines() if "PyPI" in line]
    assert said == [
        f"{system}: building the venv inside PBS job 8123.aurora-pbs-0001: compute nodes reach "
        "PyPI only through ALCF's proxy, so pip uses http://proxy.alcf.anl.gov:3128 (a login "
        "node needs none: build there when you can)"
    ]
    assert site.call("-m", "pip", "install")["proxy"] == ALCF_PROXY_ENV
    # Only the build gets the proxy; the user's shell is left as it was.
    assert result.stdout.splitlines()[-1].endswith("http_proxy=unset")


def test_existing_venv_inside_a_job_is_used_without_pip_or_proxy(tmp_path):
    site = Site(tmp_path, "aurora")
    site.make_venv(site.default_venv, "frameworks/2025.3.1")
    result = site.source_setup(PBS_JOBID="8123.aurora-pbs-0001")
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout.splitlines() == [
        f"aurora: venv {site.default_venv} active; run 'hpcprof-kit doctor'",
        f"after: VIRTUAL_ENV={site.default_venv} HPCPROF_SYSTEM=aurora http_proxy=unset",
    ]
    assert site.recorded() == []


def test_venv_built_on_another_module_is_named_with_the_fix(tmp_path):
    site = Site(tmp_path, "aurora")
    venv = tmp_path / "project" / "my-venv"
    site.make_venv(venv, "frameworks/2025.2.0")
    result = site.source_setup(HPCPROF_VENV=str(venv))
    assert result.returncode == 0
    assert result.stderr.splitlines() == [
        f"aurora: venv {venv} was built on frameworks/2025.2.0 but frameworks/2025.3.1 is "
        f"loaded; rebuild it (rm -rf {venv}, then source this again) or 'module load "
        "frameworks/2025.2.0'"
    ]
    assert f"VIRTUAL_ENV={venv} " in result.stdout and site.recorded() == []


def test_venv_without_a_record_of_its_module_is_not_warned_about(tmp_path):
    site = Site(tmp_path, "polaris")
    site.make_venv(site.default_venv, None)
    result = site.source_setup()
    assert result.returncode == 0 and result.stderr == ""


def test_failed_build_names_the_half_built_venv(tmp_path):
    site = Site(tmp_path, "polaris")
    result = site.source_setup(PIP_FAILS="1")
    assert result.returncode == 3
    assert result.stderr.splitlines()[-1] == (
        f"polaris: installing the kit into {site.default_venv} failed (see above); remove the "
        f"half-built venv (rm -rf {site.default_venv}) and source this again"
    )
    assert not [c for c in site.recorded() if c["argv"][:2] == ["-m", "ipykernel"]]


def test_missing_pinned_module_is_named(tmp_path):
    site = Site(tmp_path, "aurora")
    shell = SHELL.replace('echo "module $*" >>"$MODULES_LOG"', "return 1")
    result = subprocess.run(["bash", "-c", shell, "_", str(REPO / "env/aurora/setup.sh")],
                            capture_output=True, text=True, env=site.env(), timeout=60)  # fmt: skip
    assert result.returncode == 3
    assert result.stderr.splitlines() == [
        "aurora: 'module load frameworks/2025.3.1' failed; are you on Aurora? "
        "('module avail frameworks' lists the versions there)"
    ]


# ---- the kernel -------------------------------------------------------------------------------


@pytest.mark.parametrize(("system", "proxied"),
                         [("aurora", True), ("polaris", True), ("local", False)])  # fmt: skip
def test_kernel_gets_the_alcf_proxy_on_alcf_systems(tmp_path, system, proxied):
    site = Site(tmp_path, "aurora")
    bin_dir = site.venv_python.parent
    (bin_dir / "python3").symlink_to(site.venv_python)
    env = dict(site.env(HPCPROF_SYSTEM=system), PATH=f"{bin_dir}:/usr/bin:/bin")
    result = subprocess.run(
        ["bash", str(REPO / "env/common/register_kernel.sh"), "hpcprof-kit", "My kernel"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"kernel 'hpcprof-kit' registered for {bin_dir / 'python3'}\n"
    argv = site.call("-m", "ipykernel")["argv"]
    expected = ["-m", "ipykernel", "install", "--user", "--name", "hpcprof-kit",
                "--display-name", "My kernel", "--env", "KINETO_LOG_LEVEL", "6",
                "--env", "HPCPROF_SYSTEM", system]  # fmt: skip
    if proxied:
        for name in PROXY_VARS:
            expected += ["--env", name, ALCF_PROXY_ENV[name]]
    assert argv == expected


# ---- JupyterLab on an Aurora compute node -----------------------------------------------------


def _jupyter_node(tmp_path: Path, hostname: str) -> tuple[dict[str, str], Path]:
    bin_dir = tmp_path / "node-bin"
    _write_exe(bin_dir / "hostname", f'#!/bin/sh\necho "{hostname}"\n')
    log = tmp_path / "jupyter.args"
    _write_exe(bin_dir / "jupyter", f'#!/bin/sh\nprintf "%s\\n" "$@" >"{log}"\n')
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "USER": "alice", "HOME": str(tmp_path)}, log


def test_jupyter_prints_alcfs_tunnel_route_and_binds_localhost(tmp_path):
    env, log = _jupyter_node(tmp_path, "x4407c6s2b0n0")
    result = subprocess.run(["bash", str(REPO / "env/aurora/jupyter_on_compute_node.sh"), "9999"],
                            capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "On your laptop, in a new terminal:",
        "  ssh -L 9999:127.0.0.1:9999 -J alice@aurora.alcf.anl.gov alice@x4407c6s2b0n0",
        "(this needs your laptop's public key in ~/.ssh/authorized_keys on Aurora, and ~/.ssh "
        "there with mode 700: chmod 700 ~/.ssh)",
        "then open the http://127.0.0.1:9999/lab?token=... URL that JupyterLab prints below.",
    ]
    assert log.read_text().splitlines() == ["lab", "--no-browser", "--ip=127.0.0.1",
                                            "--port=9999"]  # fmt: skip


def test_jupyter_refuses_a_login_node(tmp_path):
    env, log = _jupyter_node(tmp_path, "aurora-uan-0010")
    result = subprocess.run(["bash", str(REPO / "env/aurora/jupyter_on_compute_node.sh")],
                            capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    assert result.returncode == 1 and not log.exists()
    assert result.stderr == (
        "jupyter_on_compute_node: aurora-uan-0010 is a login node; start an interactive job "
        "(qsub -I ...) and run this on its compute node\n"
    )


def test_polaris_record_names_the_kernel_the_recipe_registers():
    from hpcprof_kit.systems import load_system

    assert "'Python (hpcprof-kit, Polaris)'" in load_system("polaris").extra["jupyter"]["note"]
