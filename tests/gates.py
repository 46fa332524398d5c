"""Gates between a test and the job it started: named pipes (FIFOs), never sleeps.

A job command from :meth:`Gate.command` writes ``started`` into one pipe (blocking until the
test reads it), then blocks reading the other until the test releases it, then runs its tail.

    gate = Gate(tmp_path)
    job = submit(spec(*gate.command("exit 3")))
    gate.wait_started()      # the job is running now
    gate.release()           # and now it goes on to `exit 3`
"""

from __future__ import annotations

import os
import select
import threading
from pathlib import Path

DEFAULT_TIMEOUT_S = 60.0


class Gate:
    def __init__(self, folder: Path, name: str = "gate") -> None:
        self.started = Path(folder) / f"{name}.started"
        self.go = Path(folder) / f"{name}.go"
        for fifo in (self.started, self.go):
            os.mkfifo(fifo)

    def command(self, then: str = "exit 0") -> list[str]:
        """``bash -c`` that says started, waits for the release, then runs ``then``."""
        script = f'echo started > "$0"; read -r _ < "$1"; {then}'
        return ["bash", "-c", script, str(self.started), str(self.go)]

    def wait_started(self, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        """Block until the job has written ``started`` (AssertionError after ``timeout`` s)."""
        data = read_line(self.started, timeout)
        assert data == b"started\n", data

    def release(self, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        """Let the job go on (AssertionError if it is not waiting within ``timeout`` s)."""
        opened = threading.Event()

        def let_go() -> None:
            with open(self.go, "w") as fh:  # blocks until the job opens its end
                opened.set()
                fh.write("go\n")

        threading.Thread(target=let_go, daemon=True).start()
        assert opened.wait(timeout), f"the job was not waiting on {self.go} within {timeout:g} s"


def read_line(fifo: Path, timeout: float = DEFAULT_TIMEOUT_S) -> bytes:
    """The first line a writer puts into ``fifo``, newline included (AssertionError when none
    opens it, or it says nothing or closes it early, within ``timeout`` s)."""
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        # Until a writer opens the pipe, select() does not report it readable.
        ready, _, _ = select.select([fd], [], [], timeout)
        assert ready, f"nothing opened {fifo} within {timeout:g} s"
        data = b""
        while not data.endswith(b"\n"):
            ready, _, _ = select.select([fd], [], [], timeout)
            assert ready, f"{fifo} was opened but said nothing within {timeout:g} s"
            chunk = os.read(fd, 256)
            assert chunk, f"{fifo} was closed after {data!r}"
            data += chunk
        return data
    finally:
        os.close(fd)
