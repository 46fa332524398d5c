"""Notebook 02 exercise: the XPU spelling of two CUDA-only names."""

from __future__ import annotations

from hpcprof_kit.exercises import feedback


def check_xpu_names(backend: str | None, sort_key: str | None) -> bool:
    """Check the XPU replacements for the ``"nccl"`` backend and the ``self_cuda_time_total`` key.

    >>> check_xpu_names("xccl", "self_xpu_time_total")
    Correct - init_process_group("xccl") and sort_by="self_xpu_time_total" (or self_device_time_total).
    True
    """
    from hpcprof_kit.porting import STRING_MAP

    want_backend = STRING_MAP["nccl"][0]
    keys = {STRING_MAP["self_cuda_time_total"][0], "self_device_time_total"}
    return feedback(
        backend == want_backend and sort_key in keys,
        hint="Look at the diff above: which string replaced 'nccl', and which sort key replaced "
        "'self_cuda_time_total'?",
        well_done=f'Correct - init_process_group("{want_backend}") and sort_by="self_xpu_time_total" '
        "(or self_device_time_total).",
    )
