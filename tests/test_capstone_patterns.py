"""Notebook 09 draws one attendee in three a run of the patterns that come and go (a rotating
slow rank, slow steps on every rank, a host stall): the draw is the seed's, the check accepts
a right answer of each kind and refuses a wrong one without naming a problem the learner did
not, the report finds what the key says, and the notebook shows its Time lost account only
once the diagnosis passed."""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import nbformat
import pytest

from hpcprof_kit import traces
from hpcprof_kit.exercises import nb09
from hpcprof_kit.exercises.nb09 import PATTERN_EVERY, check_diagnosis, write_run
from hpcprof_kit.traces.corpus import PATTERNS
from hpcprof_kit.validate.answers import answer_key, diagnosis_patterns, key_text

NB09 = Path(__file__).resolve().parents[1] / "notebooks" / "09_capstone_diagnosis.ipynb"
PATTERN_SEEDS = range(0, 300, PATTERN_EVERY)


def _seed_with(kind: str) -> int:
    return next(s for s in PATTERN_SEEDS if kind in answer_key(s))


def test_one_seed_in_three_draws_the_patterns_the_same_way_every_time():
    kinds = set()
    for seed in PATTERN_SEEDS:
        run = nb09._capstone_run(seed)
        key = {p["kind"]: p for p in run.key()}
        assert set(key) <= set(PATTERNS) and 2 <= len(key) <= 3, seed
        assert 4 <= run.ranks <= nb09.MAX_RANKS, seed
        stall = set(key.get("host_stall", {}).get("steps", []))
        assert not stall & set(key.get("rotating_straggler", {}).get("steps", [])), seed
        assert nb09._capstone_run(seed).key() == run.key()
        kinds |= set(key)
    assert kinds == set(PATTERNS)
    # the other seeds keep the corpus's problems: the worked seed 14 among them
    assert not set(answer_key(14)) & set(PATTERNS)


def test_a_rotating_straggler_is_right_only_with_each_step_s_slow_rank(capsys):
    seed = _seed_with("rotating_straggler")
    key = answer_key(seed)
    by_step = key["rotating_straggler"]
    others = {k: v for k, v in key.items() if k != "rotating_straggler"}
    steps = sorted(by_step)
    assert check_diagnosis({**others, "rotating_straggler": by_step}, seed) is True
    # (ranks, steps), one rank per step in the same order, is the same answer
    paired = ([by_step[s] for s in steps], steps)
    assert check_diagnosis({**others, "rotating_straggler": paired}, seed) is True
    capsys.readouterr()
    # the ranks as a set lose which step each was slow in
    ranks = sorted(set(by_step.values()))
    assert check_diagnosis({**others, "rotating_straggler": (ranks, "all")}, seed) is False
    assert "Slow rank of each step: write it as {step: rank, ...}." in capsys.readouterr().out
    # two steps' ranks swapped; one step left out
    swapped = dict(by_step)
    swapped[steps[0]], swapped[steps[1]] = by_step[steps[1]], by_step[steps[0]]
    assert swapped != by_step
    assert check_diagnosis({**others, "rotating_straggler": swapped}, seed) is False
    assert ("rotating_straggler: a problem of this run. Steps: right. Slow rank of each step: "
            "not yet.") in capsys.readouterr().out  # fmt: skip
    assert check_diagnosis({**others, "rotating_straggler": {s: by_step[s] for s in steps[1:]}},
                           seed) is False  # fmt: skip
    assert "Steps: not yet. Slow rank of each step: not yet." in capsys.readouterr().out


def test_a_one_rank_straggler_on_a_rotating_run_gets_a_hint_not_the_name(capsys):
    seed = _seed_with("rotating_straggler")
    rank = next(iter(answer_key(seed)["rotating_straggler"].values()))
    assert check_diagnosis({"straggler": ([rank], "all")}, seed) is False
    out = capsys.readouterr().out
    assert "straggler: not a problem of this run." in out
    assert "the same rank in every step it slows" in out
    assert "rotating" not in out and not re.search(r"slow_steps|host_stall", out)


@pytest.mark.parametrize("kind", ["slow_steps", "host_stall"])
def test_slow_steps_and_a_host_stall_are_right_with_their_ranks_and_steps(kind, capsys):
    seed = _seed_with(kind)
    key = answer_key(seed)
    ranks, steps = key[kind]
    assert check_diagnosis(key, seed) is True
    capsys.readouterr()
    wrong_steps = [s + 1 for s in steps]
    wrong_ranks = "all" if kind == "host_stall" else [0]
    for where in ((ranks, wrong_steps), (wrong_ranks, steps)):
        assert check_diagnosis({**key, kind: where}, seed) is False
        line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith(kind))
        assert "not yet" in line
    # the problem alone: the check names what else is there only by where to look
    assert check_diagnosis({kind: key[kind]}, seed) is False
    out = capsys.readouterr().out
    assert f"{kind}: a problem of this run. Ranks: right. Steps: right." in out
    for other in set(key) - {kind}:
        assert other not in out


def test_a_host_stall_takes_a_rank_and_a_step_as_numbers():
    seed = _seed_with("host_stall")
    key = answer_key(seed)
    (rank,), (step,) = key["host_stall"]
    assert check_diagnosis({**key, "host_stall": (rank, step)}, seed) is True


def test_the_instructors_key_and_the_hidden_patterns_name_the_patterns():
    seed = _seed_with("rotating_straggler")
    assert f"nb09 check_diagnosis (seed {seed}): {answer_key(seed)!r}" in key_text(seed)
    names = diagnosis_patterns(seed)
    assert any(re.search(p, "rotating_straggler") for p in names)
    assert not any(re.search(p, "straggler") for p in names if "rotating" in p)


@pytest.mark.parametrize("seed", [0, 9, 27, 48])
def test_the_report_finds_what_the_key_says(seed, tmp_path):
    key = answer_key(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = traces.report(traces.load(write_run(seed, tmp_path) / "traces"))
    found = {f["kind"]: f for f in rep.findings if f["kind"] in PATTERNS}
    assert set(found) == set(key)
    for kind, want in key.items():
        f = found[kind]
        assert f["lost_ms"] > 0
        if kind == "rotating_straggler":
            got = {int(s): r for s, r in f["evidence"]["slow_rank_by_step"].items()}
            assert got == want
        else:
            ranks, steps = want
            assert f["steps"] == steps
            assert f["ranks"] == (list(range(nb09._capstone_run(seed).ranks))
                                  if ranks == "all" else ranks)  # fmt: skip
    text = rep.time_lost.text()
    assert text.startswith("Time lost: ") and rep.time_lost.lost_ms > 0
    lost_steps = {int(s) for s in re.findall(r"^  step (\d+): ", text, re.M)}
    keyed = {s for k, v in key.items() for s in (v if k == "rotating_straggler" else v[1])}
    assert keyed <= lost_steps


def test_the_time_lost_cell_is_below_the_check_and_prints_once_it_passed():
    nb = nbformat.read(NB09, as_version=4)
    cells = nb.cells
    check = next(i for i, c in enumerate(cells) if "= check_diagnosis(" in c.source)
    at = next(i for i, c in enumerate(cells) if "rep.time_lost.text()" in c.source
              and c.cell_type == "code")  # fmt: skip
    assert at > check
    assert cells[at].source.startswith("if diagnosed:\n    print(rep.time_lost.text())")
    assert not cells[at].get("outputs")
    assert "Time lost" in cells[at - 1].source and cells[at - 1].cell_type == "markdown"
    # no cell above the check uses the account (it names the steps and the ranks)
    assert not any("time_lost" in c.source for c in cells[:check])
