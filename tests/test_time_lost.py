"""The what-if account (``hpcprof_kit.traces.view.time_lost``): it adds up in every cell, step
and run; a clean run loses 0 ms; the three patterns no rule list names are found with their
ranks, steps and cost, on the rebuilt run of the issue that asked for them and on generated
runs; the report's JSON, text and HTML carry it, and so does the ``--mpi`` report."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from hpcprof_kit import traces
from hpcprof_kit.traces import findings as fnd
from hpcprof_kit.traces.corpus import corpus_run
from hpcprof_kit.traces.corpus_patterns import pattern_run, unseen_run
from hpcprof_kit.traces.reporting.report import report, report_from_summary
from hpcprof_kit.traces.view.run_view import RunView
from hpcprof_kit.traces.view.summary import summarise
from hpcprof_kit.traces.view.time_lost import LOST_PARTS

from must_have import missing

FIXTURES = Path(__file__).parent / "fixtures" / "traces"


def _load(run, tmp_path: Path):
    return traces.load(run.write(tmp_path / "run"), cache=False)


@pytest.fixture(scope="module")
def unseen(tmp_path_factory):
    run = unseen_run()
    df = traces.load(run.write(tmp_path_factory.mktemp("unseen")), cache=False)
    return run, df, report(df)


def assert_adds_up(acc) -> None:
    """Ideal + lost = actual and the parts = lost, to 0.01 ms, per cell, step and run."""
    for table in (acc.cells, acc.steps):
        assert np.allclose(table["ideal_ms"] + table["lost_ms"], table["actual_ms"], atol=0.01)
        parts = table[list(LOST_PARTS)].sum(axis=1)
        assert np.allclose(parts, table["lost_ms"], atol=0.01)
        assert (table["lost_ms"] >= 0).all()
        assert (table.loc[table["within_noise"], "lost_ms"] == 0).all()
    assert acc.ideal_ms + acc.lost_ms == pytest.approx(acc.actual_ms, abs=0.01)
    assert sum(acc.parts.values()) == pytest.approx(acc.lost_ms, abs=0.01)
    assert acc.lost_ms == pytest.approx(acc.steps["lost_ms"].sum(), abs=0.01)
    assert acc.actual_ms == pytest.approx(acc.steps["actual_ms"].sum(), abs=0.01)


def test_the_account_adds_up_on_the_unseen_run(unseen):
    _, _, rep = unseen
    assert_adds_up(rep.time_lost)


@pytest.mark.parametrize("seed", [5001, 5002, 5003, 5004])
def test_the_account_adds_up_on_generated_runs(seed, tmp_path):
    acc = RunView.of(_load(pattern_run(seed), tmp_path)).time_lost
    assert_adds_up(acc)


@pytest.mark.parametrize("case", ["straggler", "unseen", "none"])
def test_the_account_adds_up_on_real_h100_runs(case):
    # the pathologies app recorded on an H100 (2 ranks, 7 steps; tests/fixtures/.../README)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = traces.load(FIXTURES / "gpu_pathologies" / case / "traces", cache=False)
    acc = RunView.of(df).time_lost
    assert_adds_up(acc)
    if case == "none":  # the run without a problem
        assert acc.lost_ms == 0
    if case == "straggler":  # rank 1 computes longer in steps 3 and 5: the others wait
        lost = acc.steps.set_index("step")["lost_ms"]
        assert set(lost[lost > 0].index) >= {3, 5}
        assert acc.steps.set_index("step").loc[[3, 5], "rank"].tolist() == [1, 1]


def test_a_clean_run_loses_0_ms(tmp_path):
    seed = next(s for s in range(5100, 5200) if not corpus_run(s).problems)
    acc = RunView.of(_load(corpus_run(seed), tmp_path)).time_lost
    assert acc.lost_ms == 0
    assert acc.steps["within_noise"].all()
    assert "0.0 ms (0 %) lost" in acc.text() and "every step within noise" in acc.text()


def test_the_unseen_run_names_all_three_patterns_with_their_ranks_steps_and_cost(unseen):
    run, _, rep = unseen
    by_kind = {f["kind"]: f for f in rep.findings}
    planted = {p.kind: p for p in run.problems}
    rot = by_kind["rotating_straggler"]
    # step 4's slowest rank is rank 2's stall, not rank 5's larger batch: host_stall's step
    assert rot["evidence"]["slow_rank_by_step"] == {1: 4, 2: 7, 3: 2, 5: 0, 6: 3, 7: 6}
    assert "straggler" not in by_kind  # never one rank's "intermittent straggler"
    slow = by_kind["slow_steps"]
    assert slow["steps"] == [3, 6] and slow["ranks"] == list(range(8))
    assert slow["evidence"]["period"] == 3
    assert "48 MB device-to-host copy" in slow["summary"]
    assert "host time with no traced op" in slow["summary"]
    stall = by_kind["host_stall"]
    assert stall["ranks"] == [2] and stall["steps"] == [4]
    for kind in ("rotating_straggler", "slow_steps", "host_stall"):
        cost = sum(planted[kind].cost_ms.values())
        assert by_kind[kind]["lost_ms"] == pytest.approx(cost, rel=0.15), kind
    # the run: about 275 of its ms lost, as the issue measured
    assert rep.time_lost.lost_ms == pytest.approx(275, rel=0.15)
    assert "no_warmup" not in by_kind


def test_straggler_states_each_step_cause_and_its_headline_holds(tmp_path):
    seed = next(
        s
        for s in range(5200, 5400)
        if [p.kind for p in corpus_run(s).problems] == ["straggler"]
        and len(corpus_run(s).problems[0].steps) < corpus_run(s).steps
    )
    run = corpus_run(seed)
    rep = report(_load(run, tmp_path))
    f = next(f for f in rep.findings if f["kind"] == "straggler")
    ev = f["evidence"]
    assert set(ev["cause_by_step"]) == set(f["steps"])
    # its work is measured in its own steps: the headline's lead shows in the evidence
    lead = ev["worked_before_waiting_ms"] - ev["median_other_rank_worked_ms"]
    assert lead == pytest.approx(ev["cost_ms_per_step"], rel=0.25)
    assert f["lost_ms"] > 0


def test_one_rank_runs_over_its_steps_and_cannot_attribute_waiting(tmp_path):
    run = unseen_run()
    run.ranks = 1
    run.problems = [p for p in run.problems if p.kind == "host_stall"]
    run.problems[0].ranks = [0]
    acc = RunView.of(_load(run, tmp_path)).time_lost
    assert_adds_up(acc)
    assert (acc.cells["waiting_for_ranks"] == 0).all()
    assert any("waiting for other ranks cannot be attributed" in n for n in acc.notes)
    assert acc.steps.set_index("step").loc[4, "host_untraced"] > 40


def test_no_steps_says_what_it_could_not_account_for(tmp_path):
    p = tmp_path / "t-0-of-1.json"
    p.write_text(
        '{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, '
        '"tid": 1, "ts": 10, "dur": 50}]}'
    )
    acc = RunView.of(traces.load(p, cache=False)).time_lost
    assert not acc.complete and acc.steps is None
    assert "no ProfilerStep steps" in acc.notes[0] and "not accounted for" in acc.notes[0]
    assert acc.to_dict()["steps"] == []


def test_the_report_carries_the_account_in_json_text_and_html(unseen, tmp_path, capsys):
    from hpcprof_kit.cli.traces import print_findings

    _, _, rep = unseen
    d = rep.to_dict()
    assert list(d)[:3] == ["run", "time_lost", "findings"]
    lost = d["time_lost"]
    assert lost["lost_ms"] == pytest.approx(rep.time_lost.lost_ms, abs=0.001)
    assert len(lost["cells"]) == 8 * 7 and len(lost["steps"]) == 7
    assert all("lost_ms" in f for f in d["findings"])
    print_findings(rep)
    out = capsys.readouterr().out
    assert out.index("Time lost:") < out.index("[rotating_straggler]")
    assert "lost 53.0 ms of the run" in out or "lost 52.9 ms of the run" in out
    page = rep.write_html(tmp_path / "r.html").read_text()
    assert page.index("<h2>Time lost</h2>") < page.index("<h2>Findings</h2>")
    assert page.count("data:image/png") >= 1


def test_the_mpi_report_carries_the_same_account(unseen):
    _, df, rep = unseen
    from_summary = report_from_summary(summarise(df))
    a, b = rep.time_lost, from_summary.time_lost
    assert b.lost_ms == pytest.approx(a.lost_ms, abs=0.01)
    assert b.parts == pytest.approx(a.parts, abs=0.01)
    kinds = [f["kind"] for f in from_summary.findings]
    assert {"rotating_straggler", "slow_steps", "host_stall"} <= set(kinds)


def test_the_picture_has_its_table(unseen):
    from hpcprof_kit.traces.plots.time_lost import plot_time_lost

    _, _, rep = unseen
    fig, grid = plot_time_lost(rep.time_lost)
    assert grid.shape == (8, 7)
    # each rank's own lost time: rank 2's stall in step 4, rank 4's batch in step 1
    assert grid.loc[2, 4] == pytest.approx(53, abs=3) and grid.loc[4, 1] > 20
    assert abs(grid.loc[0, 1]) < 1


@pytest.mark.parametrize("kind", ["rotating_straggler", "slow_steps", "host_stall"])
def test_each_pattern_is_found_alone_on_a_generated_run(kind, tmp_path):
    seed = next(s for s in range(5400, 5600) if [p.kind for p in pattern_run(s).problems] == [kind])
    run = pattern_run(seed)
    found = fnd.find(RunView.of(_load(run, tmp_path)))
    planted = run.problems[0]
    f = next(f for f in found if f["kind"] == kind)
    assert set(planted.steps) & set(f["steps"])
    if kind != "rotating_straggler":
        assert f["ranks"] == planted.ranks
    assert f["lost_ms"] == pytest.approx(sum(planted.cost_ms.values()), rel=0.15)


def test_two_steps_are_too_few_and_the_account_says_how_many_ms_it_leaves(tmp_path):
    run = unseen_run()
    run.steps = 2
    acc = RunView.of(_load(run, tmp_path)).time_lost
    assert not acc.complete and acc.cells is None
    assert "2 whole steps: too few to tell an ideal step (3 needed)" in acc.notes[-1]
    assert "ms (rank-ms) are not accounted for" in acc.notes[-1]
    assert acc.text().startswith("Time lost: not accounted.")


def test_a_gpu_queue_filling_ramp_is_left_out_and_named():
    shared = Path(__file__).resolve().parents[2] / "shared" / "traces" / "hta"
    trace = shared / "cuda_1rank_ns_resolution.json.gz"
    if not trace.exists():
        missing("the shared real traces are not beside the repo (CI has them)")
    acc = RunView.of(traces.load(trace, cache=False)).time_lost
    assert_adds_up(acc)
    # steps 101 (35 ms) and 102 (72 ms) rise towards the steady 95.6 ms of steps 103-105
    assert any(n.startswith("steps 101, 102 rise towards the steady") for n in acc.notes)
    assert acc.steps["step"].tolist() == [103, 104, 105]
    assert acc.lost_ms == 0 and acc.noise_ms < 3


def _node_run(tmp_path: Path, slow: list[int], placed: bool) -> Path:
    """An 8-rank run whose ``slow`` ranks compute 1.5x longer in every step, written as a run
    directory (a manifest naming two hosts, a spec of 4 ranks per node) or as bare traces."""
    import json

    from hpcprof_kit.traces.corpus import Problem, Run

    run = Run(ranks=8, steps=6, seed=11, problems=[Problem("straggler", slow, list(range(6)),
                                                           1.5)])  # fmt: skip
    run_dir = tmp_path / ("run" if placed else "bare")
    run.write(run_dir / "traces")
    if placed:
        (run_dir / "manifest.json").write_text(json.dumps({"hosts": ["n0", "n1"]}))
        (run_dir / "spec.json").write_text(json.dumps({"ranks_per_node": 4}))
        return run_dir
    return run_dir / "traces"


def test_slow_ranks_of_one_node_are_one_finding_with_the_node(tmp_path):
    rep = report(_node_run(tmp_path, [4, 5, 6, 7], placed=True))
    stragglers = [f for f in rep.findings if f["kind"] == "straggler"]
    assert len(stragglers) == 1
    f = stragglers[0]
    assert f["ranks"] == [4, 5, 6, 7] and f["steps"] == list(range(6))
    assert f["evidence"]["node"] == "n1" and f["evidence"]["ranks_on_node"] == [4, 5, 6, 7]
    assert "all on node n1 (every rank of it)" in f["summary"]
    assert not any(f["kind"] == "rotating_straggler" for f in rep.findings)


def test_no_group_is_guessed_where_the_placement_is_unknown(tmp_path):
    rep = report(_node_run(tmp_path, [4, 5, 6, 7], placed=False))
    kinds = {f["kind"] for f in rep.findings}
    assert not kinds & {"straggler", "rotating_straggler"}  # neither one rank, nor rotating
    assert "several ranks are slow together" in rep.findings.coverage["straggler"]
    assert "manifest" in rep.findings.coverage["straggler"]


def test_slow_ranks_on_two_nodes_are_no_node_group(tmp_path):
    rep = report(_node_run(tmp_path, [3, 4], placed=True))
    assert not any("node" in f["evidence"] for f in rep.findings if f["kind"] == "straggler")
