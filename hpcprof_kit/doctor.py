"""``hpcprof-kit doctor``: one line per check, each OK or the fix.

>>> from hpcprof_kit.doctor import run_checks
>>> rows = run_checks()                      # doctest: +SKIP
>>> rows[0].name, rows[0].status             # doctest: +SKIP
('python', 'ok')
"""

from __future__ import annotations

import importlib
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

KERNEL_NAME = "hpcprof-kit"


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # "ok" | "warn" (optional piece missing) | "fail" (the kit cannot run)
    detail: str
    fix: str = ""

    def line(self) -> str:
        tag = {"ok": "OK  ", "warn": "WARN", "fail": "FAIL"}[self.status]
        text = f"{tag} {self.name:<16} {self.detail}"
        return f"{text} -> fix: {self.fix}" if self.fix else text


def _python() -> Check:
    v = sys.version_info
    ok = v >= (3, 10)
    return Check(
        "python",
        "ok" if ok else "fail",
        f"{v.major}.{v.minor}.{v.micro} (environment: {Path(sys.prefix).name})",
        "" if ok else "use Python >= 3.10: 'make env PYTHON=python3.11'",
    )


def _torch() -> Check:
    try:
        import torch
    except ImportError:
        return Check(
            "torch",
            "fail",
            "not importable",
            "local: 'make env' (torch==2.13.0 CPU); Aurora/Polaris: load the site module first "
            "(env/aurora/setup.sh, env/polaris/setup.sh)",
        )
    return Check("torch", "ok", f"{torch.__version__}")


def _device() -> Check:
    try:
        from hpcprof_kit import device
    except ImportError as exc:
        return Check("device", "warn", f"device discovery unavailable ({exc})")
    try:
        kind = device.detect()
        count = device.device_count()
    except Exception as exc:  # a broken driver must not hide the other checks
        return Check("device", "warn", f"detection failed: {exc}", "run 'hpcprof-kit devices'")
    return Check("device", "ok", f"{kind} x {count}")


def find_mpiexec() -> str | None:
    """The environment's own mpiexec first (the mpich wheel puts Hydra beside the interpreter),
    then PATH. Slurm's torque wrappers install an unrelated ``/usr/bin/mpiexec``."""
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else shutil.which("mpiexec")


def _launcher() -> Check:
    path = find_mpiexec()
    if not path:
        return Check(
            "launcher",
            "fail",
            "no mpiexec on PATH",
            "local: 'make env' installs Hydra mpiexec (mpich wheel); HPC: load the site MPI module",
        )
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    flavour = next(
        (name for key, name in (("HYDRA", "Hydra"), ("PALS", "Cray PALS"), ("Open MPI", "Open MPI"),
                                ("mpiexec.slurm", "Slurm wrapper: not an MPI launcher"))
         if key.lower() in out.lower()),
        "unknown flavour",
    )  # fmt: skip
    return Check("launcher", "ok", f"mpiexec ({flavour})")


def _mpi4py() -> Check:
    try:
        import mpi4py  # not mpi4py.MPI: importing that initialises MPI
    except ImportError:
        return Check(
            "mpi4py",
            "warn",
            "not importable; rendezvous falls back to environment variables",
            "local: 'make env'; HPC: use the site's mpi4py (never the mpich wheel)",
        )
    return Check("mpi4py", "ok", f"{mpi4py.__version__}")


def _schedulers() -> Check:
    found = [cmd for cmd in ("qsub", "sbatch") if shutil.which(cmd)]
    if not found:
        return Check("scheduler", "ok", "none (jobs run on this node with the local backend)")
    return Check("scheduler", "ok", "clients: " + ", ".join(found))


def _kernel() -> Check:
    try:
        importlib.import_module("ipykernel")
    except ImportError:
        return Check(
            "jupyter",
            "warn",
            "ipykernel missing: notebooks cannot use this environment",
            "pip install -e '.[lab]' (or 'make env')",
        )
    try:
        from jupyter_client.kernelspec import KernelSpecManager

        specs = KernelSpecManager().find_kernel_specs()
    except Exception:
        specs = {}
    if KERNEL_NAME in specs:
        argv0 = _kernel_python(Path(specs[KERNEL_NAME]))
        return Check("jupyter", "ok", f"kernel '{KERNEL_NAME}' registered ({argv0})")
    return Check(
        "jupyter",
        "warn",
        f"kernel '{KERNEL_NAME}' not registered (nbval with --nbval-current-env still works)",
        "'make lab', or: python -m ipykernel install --user --name hpcprof-kit",
    )


def _kernel_python(spec_dir: Path) -> str:
    try:
        argv = json.loads((spec_dir / "kernel.json").read_text())["argv"]
    except (OSError, KeyError, ValueError):
        return "unreadable kernel.json"
    return "this environment" if argv and argv[0] == sys.executable else "another Python"


def _trace_scanner() -> Check:
    from hpcprof_kit.traces.read import stream

    if stream._scan is None:
        return Check(
            "trace scanner",
            "warn",
            "not compiled: traces are read by msgspec alone (correct, about 2.6x slower)",
            "install a C compiler (gcc), then 'pip install -e .' in the kit's folder",
        )
    return Check("trace scanner", "ok", "compiled (hpcprof_kit/traces/read/_scan.c)")


def _system() -> Check:
    from hpcprof_kit.systems import detect_system

    return Check("system", "ok", f"{detect_system()} (override with HPCPROF_SYSTEM)")


def _tracers() -> list[Check]:
    """The system's vendor tracers: on PATH, or the module that provides them."""
    from hpcprof_kit.systems import detect_system, load_system
    from hpcprof_kit.systems.modules import module_for

    record = load_system(detect_system())
    rows = []
    for tool in record.vendor_tracers:
        found = shutil.which(tool)
        module = module_for(record, tool)
        if found:
            rows.append(Check(f"tracer {tool}", "ok", found))
        elif module is not None:
            rows.append(Check(f"tracer {tool}", "warn", f"not on PATH (module {module.name})",
                              f"module load {module.name}; job scripts load it themselves"))  # fmt: skip
        else:
            rows.append(Check(f"tracer {tool}", "warn", "not on PATH",
                              f"load the module that provides {tool}"))  # fmt: skip
    return rows


def _site_module() -> list[Check]:
    """A site venv built on another version of the site module than the one loaded now."""
    import os

    marker = Path(sys.prefix) / "hpcprof-site-module"
    loaded = [m for m in os.environ.get("LOADEDMODULES", "").split(":") if m]
    if not marker.exists() or not loaded:
        return []
    built = marker.read_text().strip()
    family = built.split("/", 1)[0]
    now = next((m for m in loaded if m.split("/", 1)[0] == family), None)
    if now is None or now == built or "/" not in now:
        return [Check("site module", "ok", f"venv built on {built}")]
    return [Check("site module", "warn", f"venv built on {built}, {now} is loaded now",
                  f"module load {built}, or rebuild the venv on {now}")]  # fmt: skip


CHECKS: tuple[Callable[[], Check | list[Check]], ...] = (
    _python, _torch, _device, _launcher, _mpi4py, _schedulers, _kernel, _trace_scanner, _system,
    _tracers, _site_module,
)  # fmt: skip


def run_checks() -> list[Check]:
    """Run every check; a check that crashes becomes a FAIL line instead of a traceback."""
    rows = []
    for check in CHECKS:
        try:
            found = check()
            rows.extend(found if isinstance(found, list) else [found])
        except Exception as exc:  # pragma: no cover - defensive
            rows.append(Check(check.__name__.strip("_"), "fail", f"check crashed: {exc}"))
    return rows


def report(as_json: bool = False) -> tuple[str, int]:
    """Text (or JSON) report and the exit code: 1 when any check is FAIL."""
    rows = run_checks()
    code = 1 if any(r.status == "fail" for r in rows) else 0
    if as_json:
        return json.dumps([asdict(r) for r in rows], indent=2), code
    return "\n".join(r.line() for r in rows), code
