"""Intel unitrace chrome JSON: how to recognise it, its tracks, and the rank it belongs to.

unitrace writes ``{"traceEvents": [...]`` with no other top-level keys, host events as
``cat: "cpu_op"`` (Level Zero / SYCL calls, ITT tasks, MPI), device work as
``cat: "gpu_op"`` on one synthetic thread per engine, and process names such as
``RANK 3 HOST<host>`` / ``RANK 3 DEVICE<...>``.

>>> rank_from_process_names({"1": "RANK 3 HOST x4102c0s0b0n0"})
3
"""

from __future__ import annotations

import re

import numpy as np

from hpcprof_kit.traces.read.stream import ChromeTrace

_RANK_NAME = re.compile(r"\bRANK\s+(\d+)\b")
_DEVICE_NAME = re.compile(r"DEVICE\D*(\d+)")
# Name rules for device work, as data: first match wins, else "gpu" (or "comm" by pattern).
DEVICE_NAME_TRACKS = [
    ("memcpy", re.compile(r"(?i)memory\s*copy|memcpy|copy(HtoD|DtoH|DtoD|MtoM)")),
    ("memset", re.compile(r"(?i)memory\s*fill|memset|fill\(")),
]
# Host calls into the runtime: Level Zero (ze*), Unified Runtime (ur*), OpenCL (cl*), SYCL.
RUNTIME_NAME = re.compile(r"^(ze|ur|cl|pi|zel)[A-Z]|^sycl::|^piextKernel")


def looks_like_unitrace(trace: ChromeTrace) -> bool:
    """True when the file has unitrace's shape: device ``gpu_op`` events or RANK process names.

    >>> from pathlib import Path
    >>> looks_like_unitrace(ChromeTrace(Path("a.json"), {}, {}, {"cat": ["gpu_op"]}))
    True
    """
    kineto_keys = {"schemaVersion", "deviceProperties", "distributedInfo", "baseTimeNanoseconds"}
    if kineto_keys & set(trace.header):
        return False
    if "gpu_op" in trace.vocab.get("cat", []):
        return True
    return any(_RANK_NAME.search(n) for n in trace.process_names.values())


def rank_from_process_names(process_names: dict[str, str]) -> int | None:
    """The rank in unitrace's ``RANK n ...`` process names, if they name exactly one."""
    ranks = {int(m.group(1)) for n in process_names.values() if (m := _RANK_NAME.search(n))}
    return ranks.pop() if len(ranks) == 1 else None


def unitrace_tracks(trace: ChromeTrace, comm: np.ndarray) -> np.ndarray:
    """Track of every event (codes into ``events.TRACKS``), from category and name."""
    from hpcprof_kit.traces.read.events import TRACKS

    code = {t: i for i, t in enumerate(TRACKS)}
    names = [str(n) for n in trace.vocab["name"]]
    device_kind = np.full(len(names) or 1, code["gpu"], dtype=np.int8)
    host_kind = np.full(len(names) or 1, code["cpu"], dtype=np.int8)
    for i, name in enumerate(names):
        for track, rx in DEVICE_NAME_TRACKS:
            if rx.search(name):
                device_kind[i] = code[track]
                break
        else:
            if comm[i]:
                device_kind[i] = code["comm"]
        if comm[i]:
            host_kind[i] = code["comm"]
        elif RUNTIME_NAME.search(name):
            host_kind[i] = code["runtime"]
    on_device = np.array([c == "gpu_op" for c in trace.vocab["cat"]] or [False])
    cols = trace.columns
    device = on_device[cols["cat"]]
    tracks = np.where(device, device_kind[cols["name"]], host_kind[cols["name"]])
    tracks[cols["instant"]] = code["instant"]
    return tracks.astype(np.int8)


def device_and_stream(trace: ChromeTrace) -> None:
    """Fill ``device`` and ``stream`` of device events from unitrace's pid/tid (engine) ids."""
    cols = trace.columns
    on_device = np.array([c == "gpu_op" for c in trace.vocab["cat"]] or [False])[cols["cat"]]
    device_of_pid = []
    for pid in trace.vocab["pid"]:
        m = _DEVICE_NAME.search(trace.process_names.get(str(pid), ""))
        device_of_pid.append(int(m.group(1)) if m else 0)
    tid_ids = [int(t) if str(t).lstrip("-").isdigit() else -1 for t in trace.vocab["tid"]]
    dev = np.array(device_of_pid or [0], dtype=np.int64)[cols["pid"]]
    stream = np.array(tid_ids or [-1], dtype=np.int64)[cols["tid"]]
    cols["device"] = np.where(on_device & (cols["device"] < 0), dev, cols["device"])
    cols["stream"] = np.where(on_device & (cols["stream"] < 0), stream, cols["stream"])
