"""Session set-up shared by tests/ and the nbval run over notebooks/."""

import os
import sys
import tempfile
from pathlib import Path

# Subprocesses (mpiexec, hpcprof-kit, jupyter) come from the interpreter's own environment.
_BIN = str(Path(sys.executable).parent)
if _BIN not in os.environ.get("PATH", "").split(os.pathsep):
    os.environ["PATH"] = _BIN + os.pathsep + os.environ.get("PATH", "")

# Runs started by tests and notebooks never land in the source tree.
if "HPCPROF_RUNS_DIR" not in os.environ:
    os.environ["HPCPROF_RUNS_DIR"] = tempfile.mkdtemp(prefix="hpcprof-test-runs-")

# Kineto's USDT stderr lines break stored-output comparisons; silence them before torch loads.
os.environ.setdefault("KINETO_LOG_LEVEL", "6")
