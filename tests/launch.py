"""Run a launcher command in a test and, when it fails, say why in the failure itself."""

from __future__ import annotations

import subprocess


def run_ok(cmd: list[str], timeout: float, **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run`` that fails the test with the exit status and the output's last lines
    (a rank's own error, or an abort message from the launcher) instead of a bare status."""
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)
    if done.returncode != 0:
        tail = output_tail(done.stdout, done.stderr)
        raise AssertionError(f"{cmd[0]} ... exited with {done.returncode}:\n{tail}")
    return done


def output_tail(stdout: str, stderr: str, lines: int = 25) -> str:
    """The last ``lines`` lines of a command's output, stdout then stderr."""
    return "\n".join((stdout + stderr).strip().splitlines()[-lines:])
