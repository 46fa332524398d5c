"""Rules on host-device copies: copies from pageable memory (nsys's "CUDA Async Memcpy with
Pageable Memory") and device-to-host copies that block the host ("CUDA Synchronous Memcpy").

>>> from hpcprof_kit.traces.findings.base import RULES
>>> RULES["pageable_copy"].threshold
2.0
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hpcprof_kit.traces.findings.base import finding, per_step_of, rule, share_rule
from hpcprof_kit.traces.view.run_view import RunView

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


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
    definition="device-to-host copies the host waited for, of any size: the copy's runtime "
    "call (``cudaMemcpy``, ``hipMemcpy``, a blocking ``urEnqueueUSMMemcpy``) or the wait "
    "after it (``cudaStreamSynchronize`` in ``.item()``, ``.cpu()``) ends with the copy; "
    "the host time blocked in that call, median % of wall",
    threshold=2.0,
    unit="% of step",
    noise="its ms per step beat 3 x the run's step-to-step spread",
    advice="Keep the tensor on the device, or copy it into pinned memory with "
    "non_blocking=True and read it a step later (after an event's synchronize); do it every "
    "N steps, not each step.",
    needs=("device", "sig:d2h_block_ns"),
)
def sync_copy(view: RunView) -> list[dict]:
    waits = _not_named_yet(view)
    waits = waits.assign(lost_ns=waits[["host_wait_ns", "copy_ns"]].min(axis=1)
                         + waits["idle_after_ns"])  # fmt: skip
    per = waits.groupby(["rank", "step"])
    hit = share_rule(view, "sync_copy", per["host_wait_ns"].sum())
    if hit is None:
        return []
    value, effect, ranks, steps = hit
    mine = waits[waits["rank"].isin(ranks)]
    n_steps = max(1, len(view.rows[view.rows["rank"].isin(ranks)]))

    def median_ms(column: str) -> float:
        ns = per_step_of(view, mine.groupby(["rank", "step"])[column].sum())
        return float(ns[ns.index.get_level_values("rank").isin(ranks)].median()) / 1e6

    idle_ms, lost_ms = median_ms("idle_after_ns"), median_ms("lost_ns")
    ops = mine.groupby("op").agg(calls=("host_wait_ns", "size"), ns=("host_wait_ns", "sum"))
    ops = ops.sort_values("ns", ascending=False).head(3)
    evidence = {
        "host_blocked_ms_per_step": round(effect, 3),
        "copies_per_step": round(len(mine) / n_steps, 1),
        "copy_us_median": round(float(mine["copy_ns"].median()) / 1e3, 3),
        "device_idle_after_ms_per_step": round(idle_ms, 3),
        "step_ms_lost": round(lost_ms, 3),
        "called_from": {
            str(op): {"calls": int(r["calls"]), "host_wait_ms": round(float(r["ns"]) / 1e6, 3)}
            for op, r in ops.iterrows()
        },  # fmt: skip
        "waited_in": sorted(set(mine["call"].astype(str))),
    }
    named = ", ".join(f"{op} ({r['calls']}x)" for op, r in evidence["called_from"].items())
    mb = float(view.per_step("d2h_bytes").median()) / 1e6  # the copies from 10 µs on
    if mb:
        evidence["mb_per_step"] = round(mb, 3)
    copy_us = evidence["copy_us_median"]
    each = f"{copy_us / 1e3:.1f} ms" if copy_us >= 1e3 else f"{copy_us:g} µs"
    size = f" ({mb:.0f} MB a step)" if mb >= 1 else ""
    summary = (f"the host waits {effect:.1f} ms a step ({value:.1f} %) for device-to-host "
               f"copies{size} of {each} each on the device (median), from {named}: a sync "
               f"point; the device then idles {idle_ms:.1f} ms a step until the host launches "
               "again")  # fmt: skip
    # the step pays the copy itself while the host waits (the queued work before it is not
    # lost) and the device's idle after it, until the host launches again
    return [finding("sync_copy", ranks, steps, value, summary, evidence, gain_ms=lost_ms)]


def _not_named_yet(view: RunView) -> pd.DataFrame:
    """The run's blocking copies (:attr:`~.RunView.waits`) in the steps the rules read, less
    those ``synchronize_in_step`` has named (an ``.item()``'s stream sync it counted): one
    wait, one finding."""
    import pandas as pd

    waits = view.waits
    rows = view.rows.set_index(["rank", "step"]).index
    waits = waits[pd.MultiIndex.from_frame(waits[["rank", "step"]]).isin(rows)]
    if not view.found.get("synchronize_in_step"):
        return waits
    return waits[~waits["named"].to_numpy(dtype=bool)]
