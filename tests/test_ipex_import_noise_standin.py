"""IPEX's import noise goes to a log, not to the learner: the kernel-override warning torch's
C++ writes to the process's stderr, and torch's "No CUDA runtime is found". Anything else IPEX
prints still reaches stderr.

IPEX itself is only in CI's site-torch leg (env/site_torch/run_leg.sh), where tests/test_ipex_real.py
imports it through the same function. Here a stand-in package named intel_extension_for_pytorch
prints the same lines on import, the override warning with os.write on file descriptor 2 as C++
does. Each import runs in its own process: an import registers the package for the whole process.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

OVERRIDE = (
    "[W1127 10:00:00.000000000 OperatorEntry.cpp:155] Warning: Warning only once for all "
    "operators, other operators may also be overridden.\n"
    "  Overriding a previously registered kernel for the same operator and the same dispatch key\n"
    "  operator: aten::_cummax_helper(Tensor self, Tensor(a!) values, Tensor(b!) indices, int dim) -> ()\n"
    "    registered at /build/aten/src/ATen/RegisterSchema.cpp:6\n"
    "  dispatch key: CPU\n"
    "  previous kernel: registered at /build/aten/src/ATen/RegisterCPU.cpp:30477\n"
    "       new kernel: registered at /build/ipex/csrc/cpu/aten/TorchVariables.cpp:22 (function operator())\n"
)  # fmt: skip
NO_CUDA = "No CUDA runtime is found, using CUDA_HOME='/usr/local/cuda'\n"
REAL = "IPEX stand-in: this CPU lacks AVX-512; some kernels fall back\n"


def _standin(folder: Path, *, fails: bool = False) -> Path:
    pkg = folder / "site" / "intel_extension_for_pytorch"
    pkg.mkdir(parents=True)
    body = f"""
        import os, sys
        os.write(2, {OVERRIDE.encode()!r})  # as torch's C++ does, beneath sys.stderr
        print({NO_CUDA.rstrip()!r}, file=sys.stderr)
        sys.stderr.write({REAL!r})
        __version__ = "2.8.0+standin"
        def optimize(model, optimizer=None, **kwargs):
            return model, optimizer
        """
    if fails:
        body += "raise ImportError('libintel-ext-pt-cpu.so: undefined symbol: _ZN3c10')\n"
    (pkg / "__init__.py").write_text(textwrap.dedent(body))
    return pkg.parent


def _import_in_a_rank(folder: Path, site: Path) -> subprocess.CompletedProcess:
    code = (
        "from hpcprof_kit.device import _import_ipex\n"
        "ipex, why = _import_ipex()\n"
        "print('imported', ipex.__version__ if ipex else why)\n"
    )
    env = {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{REPO}",
           "HPCPROF_RUN_DIR": str(folder / "run"), "PMI_RANK": "1"}  # fmt: skip
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120, cwd=folder)  # fmt: skip


def test_standin_ipex_import_noise_is_kept_in_the_log_and_the_rest_reaches_stderr(tmp_path):
    done = _import_in_a_rank(tmp_path, _standin(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "imported 2.8.0+standin\n"
    assert done.stderr == REAL  # neither the override warning nor the CUDA line
    log = tmp_path / "run" / "logs" / "ipex-import-rank1.log"
    kept = log.read_text()
    assert OVERRIDE in kept and NO_CUDA in kept and REAL in kept


def test_standin_ipex_that_fails_to_import_still_says_why_and_keeps_its_output(tmp_path):
    done = _import_in_a_rank(tmp_path, _standin(tmp_path, fails=True))
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "imported intel-extension-for-pytorch failed to import "
        "(ImportError: libintel-ext-pt-cpu.so: undefined symbol: _ZN3c10)\n"
    )
    assert done.stderr == REAL
    kept = (tmp_path / "run" / "logs" / "ipex-import-rank1.log").read_text()
    assert OVERRIDE in kept and NO_CUDA in kept
