"""Rules on host-device copies: copies from pageable memory (nsys's "CUDA Async Memcpy with
Pageable Memory") and device-to-host copies that block the host ("CUDA Synchronous Memcpy").

>>> from hpcprof_kit.traces.findings.base import RULES
>>> RULES["pageable_copy"].threshold
2.0
"""

from __future__ import annotations

from hpcprof_kit.traces.findings.base import finding, rule, share_rule
from hpcprof_kit.traces.view.run_view import RunView


@rule(
    "pageable_copy",
    definition="host-to-device copies from pageable memory (Kineto names them "
    "``Memcpy HtoD (Pageable -> Device)``): the driver stages them through a pinned buffer "
    "and the host waits; their time, median over the rank's steps, % of wall",
    threshold=2.0,
    unit="% of step",
    noise="its ms per step beat 3 x the run's step-to-step spread",
    advice="Pin the source: DataLoader(pin_memory=True) or tensor.pin_memory(), then "
    ".to(device, non_blocking=True) so the copy overlaps compute.",
    needs=("device", "sig:pageable_ns"),
)
def pageable_copy(view: RunView) -> list[dict]:
    if not view.per_step("named_copies").any():
        view.coverage["pageable_copy"] = (
            "not applicable: no copy in this trace names its memory kind (HIP and XPU copies "
            "say 'Host' or 'HOST', not Pageable or Pinned)"
        )
        return []
    hit = share_rule(view, "pageable_copy", "pageable_ns")
    if hit is None:
        return []
    value, effect, ranks, steps = hit
    mb = float(view.per_step("pageable_bytes").median()) / 1e6
    evidence = {
        "copy": "Memcpy HtoD (Pageable -> Device)",
        "ms_per_step": round(effect, 3),
        "mb_per_step": round(mb, 3) if mb else None,
        "gb_per_s": round(mb / effect, 2) if mb and effect else None,
    }
    size = f" of {mb:.0f} MB" if mb else ""
    return [
        finding(
            "pageable_copy", ranks, steps, value,
            f"each step copies{size} from pageable host memory to the device: {effect:.1f} ms "
            f"({value:.1f} %) with the host blocked",
            evidence, gain_ms=effect,
        )
    ]  # fmt: skip


@rule(
    "sync_copy",
    definition="device-to-host copies (not scalars: longer than 10 µs) whose runtime call "
    "ends with the copy, so the host waited for it; host time blocked, median % of wall",
    threshold=2.0,
    unit="% of step",
    noise="its ms per step beat 3 x the run's step-to-step spread",
    advice="Keep the tensor on the device, or copy it into pinned memory with "
    "non_blocking=True and read it a step later (after an event's synchronize); do it every "
    "N steps, not each step.",
    needs=("device", "sig:d2h_block_ns"),
)
def sync_copy(view: RunView) -> list[dict]:
    hit = share_rule(view, "sync_copy", "d2h_block_ns")
    if hit is None:
        return []
    value, effect, ranks, steps = hit
    mb = float(view.per_step("d2h_bytes").median()) / 1e6
    evidence = {
        "host_blocked_ms_per_step": round(effect, 3),
        "mb_per_step": round(mb, 3) if mb else None,
    }
    size = f" {mb:.0f} MB" if mb else ""
    return [
        finding(
            "sync_copy", ranks, steps, value,
            f"each step copies{size} from the device to the host and the host waits "
            f"{effect:.1f} ms ({value:.1f} %) for it",
            evidence, gain_ms=effect,
        )
    ]  # fmt: skip
