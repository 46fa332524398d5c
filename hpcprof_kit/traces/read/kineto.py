"""Kineto's categories -> the trace table's tracks (CUDA, ROCm, XPU and CPU traces).

Reading the file is ``stream.read_chrome``; this module holds the Kineto-specific rules that
turn its columns into the one ``track`` vocabulary of ``events.TRACKS``.

>>> CATEGORY_TRACKS["kernel"], CATEGORY_TRACKS["xpu_runtime"], CATEGORY_TRACKS["gpu_memcpy"]
('gpu', 'runtime', 'memcpy')
"""

from __future__ import annotations

import numpy as np

from hpcprof_kit.traces.read.stream import ChromeTrace

# Kineto category -> track; every other category is host work ("cpu").
CATEGORY_TRACKS = {
    "kernel": "gpu",
    "Kernel": "gpu",
    "gpu_memcpy": "memcpy",
    "Memcpy": "memcpy",
    "gpu_memset": "memset",
    "Memset": "memset",
    "gpu_user_annotation": "gpu_annotation",
    "cuda_runtime": "runtime",
    "cuda_driver": "runtime",
    "xpu_runtime": "runtime",
    "xpu_driver": "runtime",
    "hip_runtime": "runtime",
    "hip_driver": "runtime",
    "privateuse1_runtime": "runtime",  # out-of-tree devices (PrivateUse1 backends)
    "privateuse1_driver": "runtime",
    "mtia_runtime": "runtime",
    "Runtime": "runtime",
    "Driver": "runtime",
}


def kineto_tracks(trace: ChromeTrace, comm: np.ndarray) -> np.ndarray:
    """Track of every event (codes into ``events.TRACKS``) from its category and name.

    ``comm`` says, per name code, whether the name matches a communication pattern;
    such kernels and host spans go on the ``comm`` track.
    """
    from hpcprof_kit.traces.read.events import TRACKS

    code = {t: i for i, t in enumerate(TRACKS)}
    by_cat = np.array(
        [code[CATEGORY_TRACKS.get(c or "", "cpu")] for c in trace.vocab["cat"]] or [0],
        dtype=np.int8,
    )
    tracks = by_cat[trace.columns["cat"]]
    movable = (tracks == code["gpu"]) | (tracks == code["cpu"])
    tracks[movable & comm[trace.columns["name"]]] = code["comm"]
    tracks[trace.columns["instant"]] = code["instant"]
    return tracks
