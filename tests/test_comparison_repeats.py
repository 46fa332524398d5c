"""Noise stated, never flipped: a comparison runs again until each variant's verdict is the
same twice in a row (at most a few runs, or a time limit), else it says "not stable on this
machine: run it again" with the spread across the runs, and no sentence of it states a
direction the runs do not support. Before, notebook 08 printed one run's verdict: on a loaded
machine "float32 x2 is faster ... 2.45x ... larger than the noise" in one run and 2.85x slower,
within noise, in the next."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

from hpcprof_kit.comparison import UNSTABLE, compare_variants, noise_verdict, repeat_until_stable

REPO = Path(__file__).resolve().parents[1]
EAGER = [10.0, 10.5, 11.0, 10.2, 10.8]
# two runs of one sweep on a loaded machine: one says faster, the next slower
FLIPPED = [{"float32 x1": EAGER, "float32 x2": [4.0, 4.2, 4.4, 4.1, 4.3]},
           {"float32 x1": EAGER, "float32 x2": [29.0, 30.0, 31.0, 30.5, 29.5]},
           {"float32 x1": EAGER, "float32 x2": [10.1, 10.6, 4.0, 30.0, 10.4]}]  # fmt: skip
DIRECTION = re.compile(r"\bis (faster|slower) than\b|larger than the noise")


def _runs(samples):
    it = iter(samples)
    return lambda: next(it)


def test_one_run_alone_states_a_direction_the_next_run_contradicts():
    """The defect: each run's own sentence is sure of itself."""
    first, second = (noise_verdict(compare_variants(s)) for s in FLIPPED[:2])
    assert "float32 x2 is faster than float32 x1" in first
    assert "float32 x1 is faster than float32 x2" in second


def test_repeats_that_flip_every_time_say_not_stable_and_show_the_spread():
    result = repeat_until_stable(_runs(FLIPPED[1:]), first=FLIPPED[0], most=3)
    assert len(result.tables) == 3
    assert result.verdicts("float32 x2") == ["faster", "slower", "within noise"]
    assert result.verdict("float32 x2") == UNSTABLE
    text = str(result)
    assert text.startswith(f"float32 x2 vs float32 x1: {UNSTABLE} (verdicts by run: faster, "
                           "slower, within noise; medians across runs 4.20-30.00 ms")  # fmt: skip
    assert not DIRECTION.search(text)


def test_repeats_stop_once_a_verdict_holds_twice():
    same = {"float32 x1": EAGER, "float32 x2": [4.1, 4.3, 4.5, 4.0, 4.2]}
    calls = []

    def measure():
        calls.append(1)
        return same

    result = repeat_until_stable(measure, first=FLIPPED[0], most=3)
    assert len(calls) == 1 and len(result.tables) == 2
    assert result.verdict("float32 x2") == "faster"
    assert str(result).endswith("larger than the noise. The same in runs 1 and 2.")
    assert result.summary().startswith("2 run(s) of the comparison in ")


def test_repeats_stop_at_the_time_limit_and_say_not_stable():
    result = repeat_until_stable(_runs(FLIPPED[1:]), first=FLIPPED[0], most=5, time_limit_s=0)
    assert len(result.tables) == 2  # one repeat always runs, then the limit stops the next
    assert result.verdict("float32 x2") == UNSTABLE


def test_notebook_08_repeats_its_comparison_and_its_bfloat16_line_follows_it():
    nb = nbformat.read(REPO / "notebooks" / "08_sequence_parallel_timing.ipynb", as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "repeat_until_stable(" in code and "configs = repeated.table" in code
    assert "print(noise_verdict(configs))" not in code
    assert "{repeated.verdict('bfloat16 x1')}" in code and "difference(configs" not in code


def test_a_third_run_measures_only_the_baseline_and_the_variants_that_flipped():
    held = [3.0, 3.1, 3.2, 3.05, 3.15]  # faster in every run: its verdict holds after two
    runs = [{"float32 x1": EAGER, "float32 x2": [29.0, 30.0, 31.0, 30.5, 29.5], "held": held},
            {"float32 x1": EAGER, "float32 x2": [4.0, 4.2, 4.4, 4.1, 4.3]}]  # fmt: skip
    asked = []

    def measure(names):
        asked.append(list(names))
        out = runs[len(asked) - 1] if len(asked) == 1 else runs[1]
        return {n: out[n] for n in names}

    first = {**FLIPPED[0], "held": held}
    result = repeat_until_stable(measure, first=first, most=3)
    # the second run measures every variant; the third only the baseline and the flipped one
    assert asked == [["float32 x1", "float32 x2", "held"], ["float32 x1", "float32 x2"]]
    assert result.verdicts("held") == ["faster", "faster"] and result.stable("held")
    assert result.verdicts("float32 x2") == ["faster", "slower", "faster"]
    assert result.verdict("float32 x2") == UNSTABLE
    text = str(result)
    assert "held is faster than float32 x1" in text and "The same in runs 1 and 2." in text
    assert f"float32 x2 vs float32 x1: {UNSTABLE} (verdicts by run: faster, slower, faster" in text


def test_notebook_05_repeats_eager_and_the_exercise_s_variant_only():
    nb = nbformat.read(REPO / "notebooks" / "05_reading_traces.ipynb", as_version=4)
    code = next(c.source for c in nb.cells if "repeat_until_stable(run_again" in c.source)
    assert "def run_again(labels):" in code  # the repeat runs only the variants it is given
    assert 'compared = ["--compile-where=none", "--compile-where=ddp"]' in code
    assert "first = {label: sweep.step_samples()[label] for label in compared}" in code
