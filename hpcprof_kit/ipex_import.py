"""Importing intel-extension-for-pytorch without its noise, which goes to a log instead.

On import IPEX makes torch print a warning that it overrides kernels (many lines, from C++,
straight to the process's stderr) and, where there is no CUDA, "No CUDA runtime is found";
under mpiexec every rank prints them. Neither tells a learner anything. :func:`quiet_import`
sends the process's stdout and stderr (file descriptors 1 and 2, where C++ writes too, and
Python's ``sys.stdout``/``sys.stderr``, which Jupyter keeps apart from them) to a log while the
module imports, then writes back to stderr every message that is not known noise.

>>> text = ("[W OperatorEntry.cpp:155] Warning: Overriding a previously registered kernel\\n"
...         "  operator: aten::_cummax_helper\\n"
...         "something IPEX really says\\n")
>>> [m.splitlines()[0] for m in messages(text)]
['[W OperatorEntry.cpp:155] Warning: Overriding a previously registered kernel', 'something IPEX really says']
>>> [is_noise(m) for m in messages(text)]
[True, False]
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import sys
import tempfile
from pathlib import Path
from types import ModuleType

from hpcprof_kit.ranks import RANK_VARS

# What IPEX's import prints that is noise (each a message's words, as torch prints them).
NOISE = ("Overriding a previously registered kernel", "No CUDA runtime is found")


def messages(text: str) -> list[str]:
    """``text`` cut into messages: a line that starts at the margin begins one, indented lines
    (the kernel-override warning's operator, dispatch key and kernels) continue it."""
    found: list[str] = []
    for line in text.splitlines(keepends=True):
        if found and line[:1] in (" ", "\t"):
            found[-1] += line
        else:
            found.append(line)
    return found


def is_noise(message: str) -> bool:
    """True for a message IPEX's import prints that tells a learner nothing (:data:`NOISE`)."""
    return any(words in message for words in NOISE)


def import_log() -> Path:
    """Where the import's output is kept: ``$HPCPROF_RUN_DIR/logs/ipex-import-rank<R>.log`` in
    a job, else a file of this process in the temporary folder."""
    run_dir = os.environ.get("HPCPROF_RUN_DIR")
    if run_dir:
        rank = next((os.environ[n] for n, _ in RANK_VARS if os.environ.get(n)), "0")
        return Path(run_dir) / "logs" / f"ipex-import-rank{rank}.log"
    return Path(tempfile.gettempdir()) / f"hpcprof-ipex-import-{os.getpid()}.log"


@contextlib.contextmanager
def _captured(text: io.StringIO):
    """Everything written to fds 1 and 2 and to sys.stdout/sys.stderr inside goes to ``text``."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    saved = [os.dup(1), os.dup(2)]
    with tempfile.TemporaryFile() as sink:
        try:
            os.dup2(sink.fileno(), 1)
            os.dup2(sink.fileno(), 2)
            with contextlib.redirect_stdout(text), contextlib.redirect_stderr(text):
                yield
        finally:
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            sink.seek(0)
            text.write(sink.read().decode(errors="replace"))


def quiet_import(name: str = "intel_extension_for_pytorch", log: Path | None = None) -> ModuleType:
    """Import ``name`` with its noise kept in ``log`` (default :func:`import_log`); any other
    output is written back to stderr. An import that fails raises as it would, its output kept
    and written back the same way."""
    text = io.StringIO()
    try:
        with _captured(text):
            return importlib.import_module(name)
    finally:
        _keep(text.getvalue(), log or import_log())


def _keep(text: str, log: Path) -> None:
    if not text:
        return
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "a") as fh:
        fh.write(text)
    rest = "".join(m for m in messages(text) if not is_noise(m))
    if rest:
        sys.stderr.write(rest)
        sys.stderr.flush()
