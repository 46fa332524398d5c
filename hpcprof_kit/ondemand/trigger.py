"""The rank side of on-demand tracing: an optimizer-step hook that answers trace requests.

Every optimizer step costs one ``os.stat`` of ``<run_dir>/ondemand/``; only when that folder
changes (a request arrived) does the rank read it. A request ``request-<id>.json`` asking for N
steps makes the rank record its next N optimizer steps with torch.profiler, write
``traces/ondemand-<id>-<rank>-of-<world>.json`` (and its table in ``tables/``), then
``ondemand/acks/ack-<id>-<rank>.json``. Requests already present when the rank starts are old
and ignored. A request that cannot be read or parsed is logged and acked as failed; a failure
while tracing is written into the ack; training never stops for either.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import socket
import time
import warnings
from pathlib import Path
from typing import Any

ONDEMAND_DIR = "ondemand"
log = logging.getLogger(__name__)


def write_json_atomically(path: Path, data: dict[str, Any]) -> None:
    """Write JSON under a temporary name and rename it, so readers never see half a file."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


class OnDemandTrigger:
    """One rank's listener: call :meth:`after_step` after each optimizer step (a post hook does)."""

    def __init__(self, run_dir: Path, rank: int, world_size: int) -> None:
        self.run_dir, self.rank, self.world_size = Path(run_dir), rank, world_size
        self.folder = self.run_dir / ONDEMAND_DIR
        for sub in ("live", "acks"):
            (self.folder / sub).mkdir(parents=True, exist_ok=True)
        self.seen = {p.stem.removeprefix("request-") for p in self.folder.glob("request-*.json")}
        self.last_mtime = self._mtime()
        self.steps_done = 0  # optimizer steps this rank has taken since install
        self.active: dict[str, Any] | None = None
        self.live_file = self.folder / "live" / f"rank-{rank}.json"
        write_json_atomically(
            self.live_file,
            {
                "rank": rank,
                "world_size": world_size,
                "pid": os.getpid(),
                "host": socket.gethostname(),
            },
        )
        atexit.register(self.close)

    def _mtime(self) -> int:
        try:
            return os.stat(self.folder).st_mtime_ns
        except FileNotFoundError:
            return 0

    def after_step(self, *_: Any) -> None:
        """The optimizer post hook (signature ``hook(optimizer, args, kwargs)``)."""
        self.steps_done += 1
        if self.active is not None:
            self.active["profiler"].step()
            return
        mtime = self._mtime()
        if mtime == self.last_mtime:
            return
        self.last_mtime = mtime
        try:
            paths = sorted(self.folder.glob("request-*.json"))
        except OSError as exc:  # a broken request folder must never stop training either
            log.warning("on-demand requests in %s unreadable (%s); ignored", self.folder, exc)
            return
        for path in paths:
            req_id = path.stem.removeprefix("request-")
            if req_id in self.seen:
                continue
            self.seen.add(req_id)
            request = self._read(path, req_id)
            if request is not None:
                self._start(req_id, request)
                return

    def _read(self, path: Path, req_id: str) -> dict[str, Any] | None:
        """The request, or None (logged and acked as failed) when it cannot be used."""
        try:
            request = json.loads(path.read_text())
            if not isinstance(request, dict):
                raise ValueError(f"a JSON object was expected, not {type(request).__name__}")
            return request
        except (OSError, ValueError) as exc:  # a broken request must never stop training
            why = f"{type(exc).__name__}: {exc}"
            log.warning("rank %d ignores on-demand request %s: %s", self.rank, path, why)
            try:
                self._ack(req_id, {"ok": False, "error": f"unreadable request: {why}"})
            except OSError as ack_exc:
                log.warning("rank %d could not ack request %s: %s", self.rank, req_id, ack_exc)
            return None

    def _start(self, req_id: str, request: dict[str, Any]) -> None:
        try:
            import torch.profiler

            from hpcprof_kit.profiling.factory import TraceWriter, table_sort_key
            from hpcprof_kit.profiling.select import available_activities

            steps = int(request["steps"])
            acts = available_activities()
            writer = TraceWriter(
                self.run_dir / "traces", self.run_dir / "tables", f"ondemand-{req_id}",
                self.rank, self.world_size, False, table_sort_key(acts),
            )  # fmt: skip
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # "won't be using warmup": recording starts at once
                schedule = torch.profiler.schedule(wait=0, warmup=0, active=steps, repeat=1)
            prof = torch.profiler.profile(
                activities=[getattr(torch.profiler.ProfilerActivity, a.upper()) for a in acts],
                schedule=schedule,
                on_trace_ready=lambda p: self._finish(p),
            )
            self.active = {"id": req_id, "steps": steps, "writer": writer, "profiler": prof,
                           "first_step": self.steps_done + 1}  # fmt: skip
            prof.start()
        except Exception as exc:  # a broken request must never stop training
            self.active = None
            self._ack(req_id, {"ok": False, "error": f"{type(exc).__name__}: {exc}"})

    def _finish(self, prof: Any) -> None:
        active, self.active = self.active, None
        if active is None:
            return
        try:
            active["writer"](prof)
            trace = active["writer"].written[-1]
            self._ack(active["id"], {
                "ok": True, "steps": active["steps"], "first_step": active["first_step"],
                "last_step": active["first_step"] + active["steps"] - 1,
                "trace": str(trace.relative_to(self.run_dir)),
            })  # fmt: skip
        except Exception as exc:
            self._ack(active["id"], {"ok": False, "error": f"{type(exc).__name__}: {exc}"})

    def _ack(self, req_id: str, data: dict[str, Any]) -> None:
        data = {"id": req_id, "rank": self.rank, "world_size": self.world_size,
                "host": socket.gethostname(), "time": time.time(), **data}  # fmt: skip
        write_json_atomically(self.folder / "acks" / f"ack-{req_id}-{self.rank}.json", data)

    def close(self) -> None:
        """At exit: finish a trace cut short by the end of training, and leave the live list."""
        active, self.active = self.active, None
        if active is not None:
            prof = active["profiler"]
            done = self.steps_done - active["first_step"] + 1
            try:
                prof.stop()
                active["writer"](prof)
                self._ack(active["id"], {"ok": False, "steps": max(done, 0),
                                         "error": f"training ended after {done} of {active['steps']} steps",
                                         "trace": str(active["writer"].written[-1].relative_to(self.run_dir))})  # fmt: skip
            except Exception as exc:
                self._ack(active["id"], {"ok": False, "error": f"{type(exc).__name__}: {exc}"})
        self.live_file.unlink(missing_ok=True)
