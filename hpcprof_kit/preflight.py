"""``hpcprof-kit preflight``: the day before a workshop, on the real login node, check what a
batch job will meet — in a clean login shell like a batch job's, not in your own shell.

One line per check, each OK, WARN or FAIL with the fix: the site modules load, the kit imports
from the environment jobs activate, the venv was built on the module loaded now, the tracers
resolve after their modules (nsys and ncu with their version: the Nsight GUIs attendees need),
the queue (or reservation) and the account are accepted, the filesystems exist.

>>> from hpcprof_kit.preflight import login_shell_script
>>> print(login_shell_script(["module load pti-gpu"], "command -v unitrace"))
set -e
module load pti-gpu
command -v unitrace
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from dataclasses import asdict
from pathlib import Path

from hpcprof_kit.doctor import Check  # the same OK/WARN/FAIL line as doctor's
from hpcprof_kit.jobs.environment import site_default_venv
from hpcprof_kit.systems import System, load_system
from hpcprof_kit.systems.modules import module_for, site_modules

# Where each filesystem name of `-l filesystems=` lives on ALCF systems (docs: running-jobs).
FILESYSTEM_PATHS = {"home": "/home", "flare": "/lus/flare", "eagle": "/lus/eagle",
                    "grand": "/lus/grand", "daos_user": ""}  # fmt: skip
SITE_MODULE_FILE = "hpcprof-site-module"  # written into the venv by env/common/site_venv.sh
_RESERVATION = re.compile(r"^[RS]\d+$")
# The tools whose reports open in a GUI on the attendee's laptop, and that GUI's name.
NSIGHT_GUIS = {"nsys": "Nsight Systems", "ncu": "Nsight Compute"}
_VERSION = re.compile(r"\b(20\d\d\.\d+(?:\.\d+)*)")


def login_shell_script(setup: list[str], body: str) -> str:
    return "\n".join(["set -e", *setup, body])


def clean_login_shell(script: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
    """Run ``script`` in a login shell with only what a PBS batch job starts from, in $HOME
    (where PBS starts a job: the kit's own checkout in the current folder would hide a venv
    that cannot import it)."""
    keep = {k: os.environ[k] for k in ("HOME", "USER", "LOGNAME", "LANG") if k in os.environ}
    env = {**keep, "PATH": "/usr/bin:/bin", "SHELL": "/bin/bash", "PBS_ENVIRONMENT": "PBS_BATCH"}
    home = keep.get("HOME") or str(Path.home())
    return subprocess.run(["bash", "-l", "-c", script], env=env, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL, cwd=home)  # fmt: skip


def _last_error(done: subprocess.CompletedProcess[str]) -> str:
    """The line that says what went wrong: a traceback's last, else the first two."""
    lines = [ln.strip() for ln in done.stderr.splitlines() if ln.strip()]
    if not lines:
        return f"exit status {done.returncode}"
    return lines[-1] if lines[0].startswith("Traceback") else " ".join(lines[:2])


def _venv_path(record: System, venv: str | None) -> str:
    chosen = venv or site_default_venv(record)
    return os.path.expandvars(chosen.replace("~/", "$HOME/", 1))


def check_modules(record: System) -> Check:
    done = clean_login_shell(login_shell_script(list(record.setup_lines), "true"))
    shown = "; ".join(record.setup_lines) or "(none)"
    if done.returncode != 0:
        return Check("modules", "fail", f"'{shown}' failed: {_last_error(done)}",
                     f"see 'module avail'; update [environment] setup in {record.source}")  # fmt: skip
    return Check("modules", "ok", f"{shown} (clean login shell)")


def check_kit(record: System, venv: str) -> Check:
    body = (f"source {shlex.quote(venv)}/bin/activate && python3 -c "
            "'import hpcprof_kit, torch; print(hpcprof_kit.__version__, torch.__version__)'")  # fmt: skip
    done = clean_login_shell(login_shell_script(list(record.setup_lines), body))
    if done.returncode != 0:
        return Check(
            "kit", "fail",
            f"the kit does not import from {venv} after the site modules: {_last_error(done)}",
            f"on a login node: source env/{record.name}/setup.sh (builds that venv), or pass "
            "--venv with the environment your jobs activate",
        )  # fmt: skip
    kit, torch = (done.stdout.split() + ["?", "?"])[:2]
    return Check("kit", "ok", f"hpcprof_kit {kit} with torch {torch} from {venv}")


def check_venv_module(record: System, venv: str) -> Check:
    python = next((m for m in site_modules(record) if "python" in m.provides), None)
    marker = Path(venv) / SITE_MODULE_FILE
    if python is None or not marker.exists():
        return Check("venv module", "warn", f"{venv} does not say which module it was built on",
                     f"rebuild it with env/{record.name}/setup.sh")  # fmt: skip
    built = marker.read_text().strip()
    if built.split(":")[0] != python.name:
        return Check("venv module", "fail",
                     f"{venv} was built on {built}, jobs load {python.name}",
                     f"remove {venv} and source env/{record.name}/setup.sh again")  # fmt: skip
    return Check("venv module", "ok", f"built on {built}, the module jobs load")


def read_version(text: str) -> str | None:
    """The version an Nsight tool's ``--version`` prints (year.release...), else None.

    >>> read_version("NVIDIA Nsight Systems version 2024.5.1.113-245134619542v0")
    '2024.5.1.113'
    >>> read_version("NVIDIA (R) Nsight Compute Command Line Profiler\\n"
    ...              "Copyright (c) 2018-2024 NVIDIA Corporation\\n"
    ...              "Version 2024.3.2.0 (build 34861637) (public-release)")
    '2024.3.2.0'
    """
    found = _VERSION.search(text)
    return found.group(1) if found else None


def _gui_rule(tool: str, where: str, version_text: str) -> Check:
    """The attendees' Nsight GUI must be the site's version or newer: a GUI opens reports of its
    own version and older ones."""
    gui = NSIGHT_GUIS[tool]
    version = read_version(version_text)
    if version is None:
        return Check(f"tracer {tool}", "warn", f"{where}; '{tool} --version' printed no version",
                     f"run '{tool} --version' after the module and give attendees that version "
                     f"of {gui}")  # fmt: skip
    return Check(f"tracer {tool}", "ok",
                 f"{where}, version {version}: attendees need {gui} {version} or newer on their "
                 "laptops to open its reports")  # fmt: skip


def check_tracer(record: System, tool: str) -> Check:
    module = module_for(record, tool)
    setup = list(record.setup_lines)
    if module is not None:
        setup += [f"module use {shlex.quote(module.use)}"] if module.use else []
        setup.append(f"module load {shlex.quote(module.name)}")
    body = f"command -v {tool}" + (f" && {tool} --version 2>&1" if tool in NSIGHT_GUIS else "")
    done = clean_login_shell(login_shell_script(setup, body))
    how = f"module {module.name}" if module else "the default environment"
    if done.returncode != 0:
        return Check(f"tracer {tool}", "fail", f"{tool} not found after {how}: {_last_error(done)}",
                     f"find its module with 'module spider {tool}' and update modules in "
                     f"{record.source}")  # fmt: skip
    lines = done.stdout.strip().splitlines() or [""]
    path = next((ln for ln in lines if ln.endswith(f"/{tool}")), lines[0])
    version_text = "\n".join(ln for ln in lines if ln != path)
    where = f"{path} (from {how})"
    return (
        _gui_rule(tool, where, version_text)
        if tool in NSIGHT_GUIS
        else Check(f"tracer {tool}", "ok", where)
    )


def check_queue(queue: str) -> Check:
    reservation = bool(_RESERVATION.match(queue))
    command = ["pbs_rstat", "-f", queue] if reservation else ["qstat", "-Qf", queue]
    if not shutil.which(command[0]):
        return Check("queue", "warn", f"{command[0]} is not on PATH; queue {queue} not checked",
                     "run preflight on the system's login node")  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        return Check("queue", "fail", f"{' '.join(command)}: {_last_error(done)}",
                     "use a queue of 'qstat -Q', or the reservation's queue of 'pbs_rstat'")  # fmt: skip
    kind = "reservation" if reservation else "queue"
    return Check("queue", "ok", f"{kind} {queue} is known to the scheduler")


def check_account(record: System, account: str | None) -> Check:
    if not account:
        return Check("account", "warn", "no account given", "pass --account <project>")
    if not shutil.which("sbank-list-allocations"):
        return Check("account", "warn", f"sbank is not on PATH; {account} not checked",
                     "run preflight on an ALCF login node")  # fmt: skip
    done = subprocess.run(["sbank-list-allocations", "-p", account, "-r", record.name],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    if done.returncode != 0 or account not in done.stdout:
        return Check("account", "fail", f"no allocation of {account} on {record.name}",
                     "check the project name with your PI, or 'sbank-list-allocations -r all'")  # fmt: skip
    return Check("account", "ok", f"{account} has an allocation on {record.name}")


def check_filesystems(filesystems: str) -> Check:
    missing = [n for n in filesystems.split(":") if FILESYSTEM_PATHS.get(n)
               and not Path(FILESYSTEM_PATHS[n]).is_dir()]  # fmt: skip
    if missing:
        paths = ", ".join(FILESYSTEM_PATHS[n] for n in missing)
        return Check("filesystems", "warn", f"{', '.join(missing)} not mounted here ({paths})",
                     "check on the login node; jobs that name them wait while they are down")  # fmt: skip
    return Check("filesystems", "ok", filesystems)


def run_checks(system: str, *, venv: str | None = None, queue: str | None = None,
               account: str | None = None, filesystems: str | None = None) -> list[Check]:  # fmt: skip
    """Every preflight check for ``system``, in order; a check that crashes is a FAIL line.
    What is not given comes from the workshop file when it names this system."""
    from hpcprof_kit.workshop import current

    record = load_system(system)
    ws = current()
    if ws.system == record.name:
        venv, queue = venv or ws.venv, queue or ws.queue
        account, filesystems = account or ws.project, filesystems or ws.filesystems
    chosen = _venv_path(record, venv)
    steps = [
        lambda: check_modules(record),
        lambda: check_kit(record, chosen),
        lambda: check_venv_module(record, chosen),
        *(lambda t=t: check_tracer(record, t) for t in record.vendor_tracers),
        lambda: check_queue(queue or record.default_queue),
        lambda: check_account(record, account),
        lambda: check_filesystems(filesystems or record.default_filesystems),
    ]
    rows = []
    for step in steps:
        try:
            rows.append(step())
        except Exception as exc:  # one broken check must not hide the others
            rows.append(Check("check", "fail", f"crashed: {type(exc).__name__}: {exc}"))
    return rows


def report(rows: list[Check]) -> tuple[str, int]:
    code = 1 if any(r.status == "fail" for r in rows) else 0
    return "\n".join(r.line() for r in rows), code


def as_dicts(rows: list[Check]) -> list[dict[str, str]]:
    return [asdict(r) for r in rows]
