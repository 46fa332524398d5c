"""compare_variants / noise_verdict: the sentence a notebook prints follows the numbers."""

from __future__ import annotations

import pytest

from hpcprof_kit.comparison import compare_variants, difference, noise_verdict
from hpcprof_kit.errors import SpecError

# Step times (ms) of a laptop run: two variants whose medians differ by less than their spread.
NOISY_EAGER = [52.1, 28.5, 46.8, 65.4, 58.0, 55.7, 52.4, 56.1]
NOISY_COMPILED = [50.3, 44.5, 61.2, 38.1, 55.0, 47.9, 49.6, 58.8]


def test_a_difference_inside_the_noise_is_called_within_noise():
    table = compare_variants({"eager": NOISY_EAGER, "compiled": NOISY_COMPILED})
    assert table.loc["compiled", "median"] < table.loc["eager", "median"]  # a "speed-up"...
    assert difference(table, "compiled") == "within noise"  # ...that the spread swallows
    assert noise_verdict(table) == (
        "compiled vs eager: within noise (median 49.95 ms vs 54.05 ms; the p10-p90 ranges "
        "overlap: 42.58-59.52 ms vs 41.31-60.22 ms)."
    )


def test_one_wild_step_widens_the_range_until_the_difference_is_noise():
    steady = [10.0, 10.1, 10.2, 9.9, 10.0]
    assert difference(compare_variants({"a": steady, "b": [12.0, 12.1, 12.2, 11.9]}), "b") == (
        "slower"
    )
    # the same variant with two preempted steps: its p10-p90 range now reaches the baseline's
    wild = compare_variants({"a": steady, "b": [12.0, 12.1, 12.2, 11.9, 9.0, 9.1]})
    assert noise_verdict(wild) == (
        "b vs a: within noise (median 11.95 ms vs 10.00 ms; the p10-p90 ranges overlap: "
        "9.05-12.15 ms vs 9.94-10.16 ms)."
    )


def test_a_clear_difference_names_the_faster_variant_and_the_ratio():
    table = compare_variants({"eager": [10.0, 10.4, 9.8, 10.2, 10.1], "compiled": [5, 5.1, 4.9]})
    assert table.loc["compiled", "ratio"] == pytest.approx(0.5, abs=0.01)
    assert difference(table, "compiled") == "faster"
    assert noise_verdict(table) == (
        "compiled is faster than eager: median 5.00 ms vs 10.10 ms, 2.02x; the p10-p90 ranges "
        "do not overlap (4.92-5.08 ms vs 9.88-10.32 ms): larger than the noise."
    )


def test_a_slower_variant_is_named_slower_and_the_baseline_faster():
    table = compare_variants({"core": [10, 10.2, 9.9], "none": [20, 21, 19.5]}, unit="us")
    assert difference(table, "none") == "slower"
    assert noise_verdict(table).startswith(
        "core is faster than none: median 10.00 us vs 20.00 us, 2.00x;"
    )


def test_table_rows_and_columns():
    table = compare_variants(
        {"core": [3, 1, 2, 4, 5], "none": [6, 7, 8, 9, 10], "reversed": [2, 3, 4]},
        baseline="none",
    )
    assert table.index.tolist() == ["core", "none", "reversed"]
    assert table.columns.tolist() == ["n", "median", "p10", "p90", "spread", "ratio"]
    assert table["n"].tolist() == [5, 5, 3]
    assert table.loc["core"].tolist()[1:] == pytest.approx([3.0, 1.4, 4.6, 3.2, 0.375])
    assert table.loc["none", "ratio"] == 1.0
    assert table.attrs == {"baseline": "none", "unit": "ms"}
    assert len(noise_verdict(table).splitlines()) == 2  # one sentence per non-baseline variant


def test_too_few_samples_names_the_variant_count_limit_and_fix():
    with pytest.raises(SpecError) as err:
        compare_variants({"eager": [1, 2, 3], "compiled": [1.5, 2.5]})
    assert str(err.value) == (
        "samples['compiled'] has 2 value(s); a spread needs at least 3: record more steps (a "
        "longer profiler active window or more iterations) for this variant"
    )


def test_unknown_baseline_names_the_value_and_the_choices():
    with pytest.raises(SpecError, match=r"baseline='eagre' is not one of the variants "
                       r"\['eager', 'compiled'\]; pass one of them"):  # fmt: skip
        compare_variants({"eager": [1, 2, 3], "compiled": [1, 2, 3]}, baseline="eagre")


@pytest.mark.parametrize(
    ("samples", "message"),
    [
        ({}, "samples={} holds no variants"),
        ({"eager": [1, float("nan"), 3]}, "samples['eager'] holds nan; every value must be finite"),
        ({"eager": ["fast", 2, 3]}, "samples['eager'] must be a sequence of numbers"),
    ],
)
def test_other_bad_samples(samples, message):
    with pytest.raises(SpecError) as err:
        compare_variants(samples)
    assert str(err.value).replace(" a finite number", " finite").startswith(message)


def test_verdict_of_a_table_that_is_not_a_comparison():
    import pandas as pd

    with pytest.raises(SpecError, match="not a comparison table.*compare_variants"):
        noise_verdict(pd.DataFrame({"median": [1.0]}))
    with pytest.raises(SpecError, match="only its baseline 'eager'"):
        noise_verdict(compare_variants({"eager": [1, 2, 3]}))
    with pytest.raises(SpecError, match=r"name='eager' is not a variant compared"):
        difference(compare_variants({"eager": [1, 2, 3], "b": [1, 2, 3]}), "eager")
