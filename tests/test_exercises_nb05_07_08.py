"""The exercises of notebooks 05, 07 and 08: checked against the learner's own numbers."""

from __future__ import annotations

import re

import pytest

from hpcprof_kit.comparison import compare_variants
from hpcprof_kit.exercises import nb05, nb07, nb08
from hpcprof_kit.validate import answers

# Two runs whose medians differ by less than their spread, and two that differ clearly.
NOISY = compare_variants({"eager": [52, 28, 47, 65, 58, 56, 52, 56],
                          "compiled": [50, 44, 61, 38, 55, 48, 50, 59]})  # fmt: skip
CLEAR = compare_variants({"eager": [10.0, 10.4, 9.8, 10.2, 10.1], "compiled": [5, 5.1, 4.9]})


def test_nb05_within_noise_is_the_right_answer_for_a_noisy_pair(capsys):
    assert nb05.check_compiled_verdict("faster", NOISY) is False  # its median is lower...
    out = capsys.readouterr().out
    assert out.startswith("Not yet. Hint: Look at the p10 and p90 columns of both rows")
    assert nb05.check_compiled_verdict(" Within noise", NOISY) is True  # ...inside the noise
    assert capsys.readouterr().out == (
        "Correct - compiled vs eager: within noise (median 50.00 ms vs 54.00 ms; the p10-p90 "
        "ranges overlap: 42.20-59.60 ms vs 41.30-60.10 ms).\n"
    )


def test_nb05_a_clear_speedup_is_faster_and_the_check_prints_the_ratio(capsys):
    assert nb05.check_compiled_verdict("within noise", CLEAR) is False
    capsys.readouterr()
    assert nb05.check_compiled_verdict("faster", CLEAR) is True
    assert "compiled is faster than eager: median 5.00 ms vs 10.10 ms, 2.02x" in (
        capsys.readouterr().out
    )


@pytest.mark.parametrize("answer", [None, "quicker", ""])
def test_nb05_an_answer_outside_the_choices_lists_them(answer, capsys):
    assert nb05.check_compiled_verdict(answer, CLEAR) is False
    assert "answer one of ['faster', 'slower', 'within noise']" in capsys.readouterr().out


def test_the_hidden_patterns_catch_the_printed_verdicts():
    from hpcprof_kit.comparison import noise_verdict

    for table in (NOISY, CLEAR):
        sentence = noise_verdict(table)
        assert any(
            re.search(p, sentence) for p in answers.HIDDEN["nb05"]["check_compiled_verdict"]["text"]
        )
    hint_and_question = nb05.HINT + ' Answer "faster", "slower" or "within noise".'
    assert not any(re.search(p, hint_and_question)
                   for p in answers.HIDDEN["nb05"]["check_compiled_verdict"]["text"])  # fmt: skip


def test_nb07_hidden_patterns_match_the_findings_and_the_verdict_column():
    from hpcprof_kit.affinity import plan_for

    patterns = answers.HIDDEN["nb07"]["check_cpus_per_rank"]["text"]
    assert any(re.search(p, str(plan_for("local", 2, "none"))) for p in patterns)
    assert not any(re.search(p, str(plan_for("local", 2, "core"))) for p in patterns)
    row = "2      none     0     0-1  0-1  unbound           29.90"
    assert any(re.search(p, row) for p in patterns)


def test_nb08_hint_explains_without_naming_the_table_that_holds_the_answer(capsys):
    assert nb08.check_comm_share(None, None) is False
    out = capsys.readouterr().out
    assert "compute_vs_comm" not in out and "comm_share" not in out
    assert "all_gather and reduce_scatter" in out


def test_nb07_step_samples_are_the_slowest_rank_of_each_quiet_step(tmp_path):
    from types import SimpleNamespace

    from hpcprof_kit.affinity.experiment import Experiment, profile_args
    from hpcprof_kit.affinity.presets import plan_for
    from hpcprof_kit.apps._common import write_timings

    _, first = profile_args(8)  # a job of 8 steps: timings for steps 1..7, 5..7 profiled
    per_rank = {0: [0.010, 0.012, 0.011, 0.013, 0.5, 0.6, 0.7],
                1: [0.011, 0.010, 0.015, 0.012, 0.5, 0.6, 0.7]}  # fmt: skip
    for rank, steps in per_rank.items():
        write_timings(tmp_path / "timings", {"app": "train", "rank": rank, "world_size": 2,
                                             "dtype": "float32", "timings": {"step": steps}})  # fmt: skip
    exp = Experiment({"core": plan_for("local", 2, "core")},
                     {"core": SimpleNamespace(run_dir=tmp_path)}, profiled_from=first)  # fmt: skip
    assert [round(ms, 3) for ms in exp.step_samples("core")] == [11.0, 12.0, 15.0, 13.0]


def test_nb07_cpus_per_rank_is_read_from_what_each_rank_printed(tmp_path, capsys):
    from types import SimpleNamespace

    from hpcprof_kit.affinity.experiment import Experiment
    from hpcprof_kit.affinity.presets import plan_for

    got = {"core": ("0", "1"), "none": ("0-1", "0-1"), "reversed": ("1", "0")}
    jobs = {}
    for name, cpus in got.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "stdout").write_text("".join(
            f"affinity_report host=a rank={r} local_rank={r} world_size=2 cpus={c} online=0-1 "
            "numa=0 device=cpu\n" for r, c in enumerate(cpus)))  # fmt: skip
        jobs[name] = SimpleNamespace(run_dir=tmp_path / name)
    exp = Experiment({n: plan_for("local", 2, n) for n in got}, jobs)
    assert answers.cpus_per_rank(exp) == {"core": 1, "none": 2, "reversed": 1}
    assert nb07.check_cpus_per_rank({"core": 1, "none": 2, "reversed": 1}, exp) is True
    assert capsys.readouterr().out.startswith("Correct - a plan that binds nothing")
    # a wrong plan is named, its number is not
    assert nb07.check_cpus_per_rank({"core": 1, "none": 1, "reversed": 1}, exp) is False
    hint = capsys.readouterr().out
    assert hint.startswith("Not yet. Hint: 'none' is off.") and "2" not in hint
    assert nb07.check_cpus_per_rank(None, exp) is False
    assert "give one number per plan" in capsys.readouterr().out
