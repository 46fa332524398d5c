"""HTA in its own virtual environment: build ``.venv-hta`` once, run HTA's analyses in it.

HolisticTraceAnalysis 0.5.0 needs pandas<3 while the kit runs on pandas 3, so HTA lives in
``.venv-hta`` at the repository root (git-ignored; ``HPCPROF_HTA_VENV`` moves it), created on
first use (about two minutes) and reused after. The loader benchmark (``bench_loader.py
--with-hta``) and the cross-check test (``tests/test_hta_crosscheck.py``) both use it.

    python benchmarks/hta_env.py TRACE_DIR     # HTA's figures for TRACE_DIR, as JSON
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# HPCPROF_HTA_VENV puts it elsewhere (a CI cache, a shared install)
HTA_VENV = Path(os.environ.get("HPCPROF_HTA_VENV") or REPO / ".venv-hta")
HTA_VERSION = "0.5.0"
# msgspec: bench_loader's child imports it in whichever environment it runs
REQUIREMENTS = [f"holistictraceanalysis=={HTA_VERSION}", "pandas<3", "msgspec"]

# HTA's analyses of one trace directory, as JSON on stdout: one list of row dicts per analysis.
# The idle time breakdown and the launch stats cover every rank (HTA's default is rank 0 only)
# and otherwise run with HTA's default arguments; an analysis HTA fails on gives {"error": ...}
# so the others still come back.
FIGURES = r"""
import json, logging, math, sys, warnings
warnings.simplefilter("ignore")
from hta.trace_analysis import TraceAnalysis
from hta.configs.config import logger
logger.setLevel(logging.ERROR)
analyzer = TraceAnalysis(trace_dir=sys.argv[1])
ranks = analyzer.t.get_ranks()

def rows(frame):
    return [{k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
            for row in frame.to_dict(orient="records")]

def launch_stats():
    per_rank = analyzer.get_cuda_kernel_launch_stats(ranks=ranks, visualize=False)
    return [dict(row, rank=rank) for rank, frame in per_rank.items() for row in rows(frame)]

out = {}
for name, frame in (("temporal_breakdown", analyzer.get_temporal_breakdown(visualize=False)),
                    ("comm_comp_overlap", analyzer.get_comm_comp_overlap(visualize=False))):
    out[name] = rows(frame)
for name, run in (
    ("idle_time_breakdown",
     lambda: rows(analyzer.get_idle_time_breakdown(ranks=ranks, visualize=False)[0])),
    ("cuda_kernel_launch_stats", launch_stats),
):
    try:
        out[name] = run()
    except Exception as exc:
        out[name] = {"error": f"{type(exc).__name__}: {exc}"}
print(json.dumps(out, default=lambda v: v.item()))
"""


def _works(python: Path) -> bool:
    """True when ``python`` imports HTA at :data:`HTA_VERSION` (a half-built venv, or one kept
    from an older version, does not)."""
    if not python.exists():
        return False
    check = ("import sys, importlib.metadata as m, hta.trace_analysis; "
             f"sys.exit(m.version('holistictraceanalysis') != {HTA_VERSION!r})")  # fmt: skip
    probe = [str(python), "-c", check]
    return subprocess.run(probe, capture_output=True, check=False).returncode == 0


def ensure_hta(venv: Path = HTA_VENV, quiet: bool = False) -> str | None:
    """The python of ``venv`` with HTA 0.5.0 (created on demand), or None if that fails.

    A lock file beside the venv keeps two processes from building it at once.
    """
    python = venv / "bin" / "python"
    if _works(python):
        return str(python)
    try:
        venv.parent.mkdir(parents=True, exist_ok=True)
        lock = open(venv.parent / f"{venv.name}.lock", "w")  # noqa: SIM115 (held below)
    except OSError:
        return None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _works(python):  # built by another process while this one waited
            return str(python)
        if not quiet:
            print(f"creating {venv.name} with {' '.join(REQUIREMENTS)} ...", flush=True)
        out = subprocess.DEVNULL if quiet else None
        steps = [
            [sys.executable, "-m", "venv", "--clear", str(venv)],
            [str(python), "-m", "pip", "install", "-q", *REQUIREMENTS],
        ]
        for cmd in steps:
            if subprocess.run(cmd, stdout=out, stderr=out, check=False).returncode != 0:
                return None
    return str(python) if _works(python) else None


def hta_figures(python: str, trace_dir: Path, timeout: float = 300) -> dict:
    """HTA's ``get_temporal_breakdown()``, ``get_comm_comp_overlap()``,
    ``get_idle_time_breakdown()`` and ``get_cuda_kernel_launch_stats()`` of ``trace_dir``
    (one trace file per rank), computed by HTA itself in the interpreter ``python``: a dict
    with one list of row dicts per analysis, under HTA's column names (keys
    ``temporal_breakdown``, ``comm_comp_overlap``, ``idle_time_breakdown`` and
    ``cuda_kernel_launch_stats``, whose rows also name their ``rank``). The last two cover
    every rank and are ``{"error": ...}`` where HTA fails on them.

    Raises RuntimeError with HTA's last error line when it fails.
    """
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    env.pop("PYTHONPATH", None)  # HTA's environment only, never the kit's
    done = subprocess.run(
        [python, "-c", FIGURES, str(trace_dir)],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"HTA failed on {trace_dir}: {last}")
    return json.loads(done.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    hta_python = ensure_hta()
    if hta_python is None:
        sys.exit(f"could not create {HTA_VENV}")
    print(json.dumps(hta_figures(hta_python, Path(sys.argv[1])), indent=1))
