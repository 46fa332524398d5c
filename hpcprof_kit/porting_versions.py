"""Which torch release added each name the port writes, and what it writes for an older torch.

On a site the kit runs on the module's torch (Polaris ``conda/2025-09-25``: 2.8; the ATPESC 2025
environment on Aurora: 2.8), so the port writes for a torch release: by default the oldest the
site's record names (:func:`hpcprof_kit.systems.oldest_supported`). :data:`ADDED_IN` says which
release first has each name the port may write; ``tests/test_porting_versions.py`` checks it
against the installed torch in every CI leg (torch 2.13 and torch 2.8).

>>> target_release("2.8.0.dev20250527+xpu")
(2, 8)
>>> missing_in("torch.accelerator.max_memory_allocated", (2, 8))
'2.9'
>>> missing_in("torch.accelerator.device_count", (2, 8)) is None
True
"""

from __future__ import annotations

from hpcprof_kit.errors import PortError
from hpcprof_kit.systems import oldest_supported, release

# The first torch release with each name the port writes (module attributes only: string keys
# such as "self_device_time_total" are not names a hasattr can check). A name the port writes
# that is not here exists in every torch the kit supports (the test checks that too).
ADDED_IN: dict[str, str] = {
    # torch.accelerator came in 2.6 (the *_idx spellings); the *_index ones in 2.7
    "torch.accelerator.is_available": "2.6",
    "torch.accelerator.current_accelerator": "2.6",
    "torch.accelerator.device_count": "2.6",
    "torch.accelerator.synchronize": "2.6",
    "torch.accelerator.current_stream": "2.6",
    "torch.accelerator.set_device_index": "2.7",
    "torch.accelerator.current_device_index": "2.7",
    # its memory calls came in 2.9: torch 2.8 (Polaris, ATPESC 2025) has none of them
    "torch.accelerator.empty_cache": "2.9",
    "torch.accelerator.memory_allocated": "2.9",
    "torch.accelerator.max_memory_allocated": "2.9",
    "torch.accelerator.reset_peak_memory_stats": "2.9",
    "torch.distributed.get_default_backend_for_device": "2.6",
    "torch.get_device_module": "2.5",
    "torch.amp.GradScaler": "2.3",
    "torch.autocast": "1.10",
}
# What a torch.cuda memory call returns on the CPU, where the fallback spelling has no device
# (torch.cuda's own calls return the same on a machine without a GPU).
ON_CPU: dict[str, str] = {
    "empty_cache": "None",
    "memory_allocated": "0",
    "max_memory_allocated": "0",
    "reset_peak_memory_stats": "None",
}
FALLBACK_MODULE = "torch.get_device_module(device_type)"


def target_release(torch_version: str | None = None, system: str | None = None) -> tuple[int, int]:
    """The torch release a port writes for: ``torch_version``, else the oldest ``system``'s record
    names (no system: the oldest the kit supports). PortError for a version the kit does not
    support, naming the field, the value, the oldest supported release and the fix.

    >>> target_release(system="polaris")
    (2, 8)
    """
    oldest = oldest_supported(system)
    floor = release(oldest.torch)
    assert floor is not None  # the records' own versions are checked by their accessor
    if torch_version is None:
        return floor
    wanted = release(torch_version)
    where = f"for {system}" if system else "anywhere"
    if wanted is None:
        raise PortError(
            f"torch_version (--torch) {torch_version!r} is not a torch release; pass one like "
            f"{oldest.torch} or {oldest.torch}.0, or leave it out to port for torch "
            f"{oldest.torch} (the oldest the kit supports {where})"
        )
    if wanted < floor:
        raise PortError(
            f"torch_version (--torch) {torch_version!r} is older than the oldest torch the kit "
            f"supports {where}: {oldest.torch} ({oldest.source}); pass --torch {oldest.torch} "
            "or newer, or leave it out"
        )
    return wanted


def missing_in(name: str, target: tuple[int, int]) -> str | None:
    """The release that added ``name`` when ``target`` is older than it, else None."""
    added = ADDED_IN.get(name)
    if added is None:
        return None
    version = release(added)
    return added if version is not None and version > target else None


__all__ = ["ADDED_IN", "FALLBACK_MODULE", "ON_CPU", "missing_in", "target_release"]
