"""Notebook 08's compute-vs-communication bars stay readable when step times differ > 10x."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pandas as pd
import pytest

from hpcprof_kit import timing
from hpcprof_kit.errors import SpecError


def _cvc(rows):
    cols = ["dtype", "world_size", "compute_ms", "comm_ms", "other_ms"]
    cvc = pd.DataFrame(rows, columns=cols).assign(app="seqpar", nodes=1)
    cvc["step_ms"] = cvc[["compute_ms", "comm_ms", "other_ms"]].sum(axis=1)
    cvc["comm_share"] = cvc["comm_ms"] / cvc["step_ms"]
    return cvc


# as on a CPU without bfloat16 units: ~520 ms per bfloat16 step, ~7 ms per float32 step
CPU_08 = _cvc([
    ("bfloat16", 1, 520.0, 0.0, 2.0), ("bfloat16", 2, 250.0, 14.0, 2.0),
    ("float32", 1, 6.5, 0.0, 0.5), ("float32", 2, 3.0, 2.5, 0.5),
])  # fmt: skip


def test_bars_100x_apart_get_a_panel_per_dtype_and_a_sentence_why(capsys):
    plot = timing.plot_compute_vs_comm(CPU_08)
    said = capsys.readouterr().out
    assert said.startswith("step times differ 87x (bfloat16 522.0 ms vs float32 6.0 ms per step)")
    assert said.rstrip().endswith("one panel per dtype, each with its own ms axis")
    ax_bf16, ax_f32 = plot.fig.axes[:2]
    assert [t.get_text() for t in ax_f32.get_xticklabels()] == [
        "float32\n1 rank, 1 node", "float32\n2 ranks, 1 node",
    ]  # fmt: skip
    # float32's own axis: its tallest bar fills most of the panel instead of 1 % of it
    assert ax_f32.get_ylim()[1] < 10 and ax_bf16.get_ylim()[1] > 500
    assert plot.table.attrs["scale"] == "panels"


def test_a_gap_inside_one_dtype_turns_bars_into_shares(capsys):
    cvc = _cvc([("float32", 1, 500.0, 0.0, 0.0), ("float32", 2, 2.0, 2.0, 0.0)])
    plot = timing.plot_compute_vs_comm(cvc)
    assert "as shares of its own step" in capsys.readouterr().out
    heights = [p.get_height() for p in plot.fig.axes[0].patches]
    assert sum(heights) == pytest.approx(2.0)  # each bar adds up to 1
    assert "4.0 ms, 50% comm" in [t.get_text() for t in plot.fig.axes[0].texts]


def test_close_step_times_keep_one_axis_and_say_nothing(capsys):
    plot = timing.plot_compute_vs_comm(CPU_08, scale="ms")
    assert capsys.readouterr().out == "" and len(plot.fig.axes) == 1
    near = _cvc([("float32", 1, 6.0, 0.0, 1.0), ("bfloat16", 1, 5.0, 0.0, 1.0)])
    assert timing.plot_compute_vs_comm(near).table.attrs["scale"] == "ms"
    assert capsys.readouterr().out == ""
    with pytest.raises(SpecError, match="scale='log' is not one of"):
        timing.plot_compute_vs_comm(near, scale="log")
