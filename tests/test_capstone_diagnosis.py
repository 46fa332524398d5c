"""Notebook 09's exercise: every attendee's run has problems to find, the check answers item by
item without naming a problem the learner did not, the run's folder is never reused, and
the report finds in the instructors' worked run exactly what the answer key says."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

from hpcprof_kit.errors import SpecError
from hpcprof_kit.exercises import nb09
from hpcprof_kit.exercises.nb09 import (
    MAX_RANKS,
    SYMPTOMS,
    attendee_seed,
    check_diagnosis,
    write_run,
)
from hpcprof_kit.traces import load
from hpcprof_kit.traces.corpus import KINDS, corpus_run
from hpcprof_kit.traces.reporting.report import report
from hpcprof_kit.validate.answers import answer_key, answer_recorded

capstone_run = nb09._capstone_run  # the run a seed draws, its key() the answer

ANSWER_KEY = Path(__file__).resolve().parents[1] / "docs" / "instructors.md"
WORKED_SEED = 14  # the run docs/instructors.md works through


def test_every_seed_gives_two_or_three_problems_on_at_most_eight_ranks():
    for seed in range(300):
        run = capstone_run(seed)
        assert 2 <= len(run.key()) <= 3, seed
        assert 4 <= run.ranks <= MAX_RANKS, seed
    # the same draw as the corpus's, cut to 8 ranks: its problems and steps unchanged
    assert capstone_run(14).key() == corpus_run(14, problems=2).key()


def test_each_attendee_gets_a_run_of_their_own():
    seeds = {attendee_seed(f"attendee{i:02d}") for i in range(30)}
    assert len(seeds) == 30
    keys = {str(answer_key(s)) for s in seeds}
    assert len(keys) >= 25  # 10 kinds, 2-3 of them: a few classmates may share a diagnosis


def test_the_check_says_what_is_right_item_by_item_and_names_no_missed_problem(capsys):
    # seed 14: data_loading on every rank and step; rank 0 straggles in steps 3, 5, 7
    assert check_diagnosis({"straggler": ([0], "all"), "launch_bound": ("all", "all"),
                            "device_idle_host_bound": ("all", "all")}, 14) is False  # fmt: skip
    out = capsys.readouterr().out
    assert out.splitlines()[:4] == [
        "device_idle_host_bound: a symptom the report can show, not a cause.",
        "launch_bound: not a problem of this run.",
        "straggler: a problem of this run. Ranks: right. Steps: not yet.",
        "1 more problem(s) in this run that your answer does not name.",
    ]
    assert "data_loading" not in out and "[3, 5, 7]" not in out
    assert out.splitlines()[4].startswith("Not yet. Hint: device_idle_host_bound is what ")
    assert check_diagnosis({"straggler": {"ranks": [0], "steps": [3, 5, 7]},
                            "data_loading": {"ranks": list(range(5))}}, 14) is True  # fmt: skip
    assert capsys.readouterr().out.splitlines()[-1] == (
        "Correct - both problems of run 14, with their ranks and steps."
    )


def test_a_missed_problem_gets_a_hint_where_to_look_not_its_name(capsys):
    check_diagnosis({"straggler": ([0], [3, 5, 7])}, 14)
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == (
        "Not yet. Hint: look at the host's ops while the device waits, step by step."
    )
    assert "data_loading" not in out


def test_a_malformed_answer_names_the_item_and_the_form():
    with pytest.raises(SpecError, match=r"straggler: ranks='rank 0' must be 'all' or a list"):
        check_diagnosis({"straggler": ("rank 0", "all")}, 14)
    with pytest.raises(SpecError, match=r"straggler: \[0\] must be \(ranks, steps\)"):
        check_diagnosis({"straggler": [0]}, 14)
    with pytest.raises(SpecError, match="seed=-1: a whole number from 0"):
        capstone_run(-1)


def test_the_run_folder_is_fresh_each_time_and_the_reference_is_healthy(tmp_path, monkeypatch):
    # both in the same second: the second folder gets its own name
    monkeypatch.setattr(nb09, "time", SimpleNamespace(strftime=lambda fmt: "20260101-120000"))
    first, second = write_run(WORKED_SEED, tmp_path), write_run(WORKED_SEED, tmp_path)
    assert (first.name, second.name) == ("capstone_seed14_20260101-120000",
                                         "capstone_seed14_20260101-120000-1")  # fmt: skip
    assert sorted(p.name for p in (first / "traces").iterdir()) == [
        f"corpus-{r}-of-5.json" for r in range(5)
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        healthy = {f["kind"] for f in report(first / "reference").findings}
        found = report(load(first / "traces")).findings
    assert not healthy & {*KINDS, *SYMPTOMS}
    # the worked run: the report finds the key's problems, with its ranks and steps
    causes = {f["kind"]: (f["ranks"], f["steps"]) for f in found if f["kind"] in KINDS}
    assert causes == {"data_loading": (list(range(5)), list(range(10))),
                      "straggler": ([0], [3, 5, 7])}  # fmt: skip
    assert answer_key(WORKED_SEED) == {"data_loading": ("all", "all"),
                                       "straggler": ([0], [3, 5, 7])}  # fmt: skip


def test_the_instructors_key_is_the_worked_seeds_key():
    text = ANSWER_KEY.read_text()
    section = text.split("### 09_capstone_diagnosis", 1)[1]
    assert f"`answer_key({WORKED_SEED})` is `{answer_key(WORKED_SEED)!r}`" in re.sub(
        r"\s+", " ", section
    )


# --- section 6: the run recorded on an H100 (tests/fixtures/traces/gpu_pathologies) ----------
def test_the_recorded_run_is_copied_into_a_fresh_folder_with_its_reference(tmp_path):
    first, second = nb09.recorded_run(tmp_path), nb09.recorded_run(tmp_path)
    assert first != second  # never written into an earlier copy
    for part in ("traces", "reference"):
        assert sorted(p.name for p in (first / part).iterdir()) == [
            "trace-0-of-2.json.gz", "trace-1-of-2.json.gz"]  # fmt: skip


def test_the_recorded_run_check_names_no_problem_the_learner_did_not(capsys):
    assert (
        nb09.check_recorded({"pageable_copy": ("all", "all"), "straggler": ("all", "all")}) is False
    )
    out = capsys.readouterr().out
    assert "pageable_copy: a problem of this run. Ranks: right. Steps: right." in out
    assert "straggler: a problem of this run. Ranks: not yet. Steps: not yet." in out
    assert "1 more problem(s) in this run that your answer does not name." in out
    assert "synchronize_in_step" not in out
    # steps are the recorded 1-7: "all" and the full list are the same answer
    assert nb09.check_recorded({"pageable_copy": ([0, 1], list(range(1, 8))),
                                "synchronize_in_step": ("all", "all"),
                                "straggler": ([1], [3, 5])}) is True  # fmt: skip


def test_the_instructors_key_of_the_recorded_run_is_the_checker_s():
    section = re.sub(r"\s+", " ", ANSWER_KEY.read_text().split("### 09_capstone_diagnosis", 1)[1])
    assert f"`answer_recorded()` is `{answer_recorded()!r}`" in section
