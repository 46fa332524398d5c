"""The CPU twins of the rules on generated CPU-only runs (``cpu_corpus.py``, real Kineto files
loaded by the kit): a loop of tiny host ops is ``launch_bound`` and a large host block made
and dropped every step is ``allocator_churn``, each with its ranks and steps and advice for
the CPU; a clean run gets neither; a trace without ``[memory]`` events says the churn rule
could not run; ``synchronize_in_step`` says why it has nothing to measure on a CPU."""

from __future__ import annotations

import warnings

import pytest
from cpu_corpus import CpuRun

from hpcprof_kit import traces
from hpcprof_kit.traces import findings as fnd
from hpcprof_kit.traces.view.run_view import RunView

STEPS = list(range(1, 7))  # step 0 is the warm-up step the rules compare, not a problem step


def diagnose(path) -> fnd.Findings:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = traces.load(path, cache=False)
    return fnd.find(RunView.of(df))


@pytest.fixture(scope="module")
def found(tmp_path_factory) -> dict[str, fnd.Findings]:
    root = tmp_path_factory.mktemp("cpu")
    runs = {
        "clean": CpuRun(seed=5),
        "launch_bound": CpuRun(seed=6, problems={"launch_bound": 400}),
        "allocator_churn": CpuRun(seed=7, problems={"allocator_churn": 3.0}, ranks=3),
        "no_memory": CpuRun(seed=8, problems={"allocator_churn": 3.0}, memory=False),
    }
    return {name: diagnose(run.write(root / name)) for name, run in runs.items()}


def _one(findings: fnd.Findings, kind: str) -> dict:
    mine = [f for f in findings if f["kind"] == kind]
    assert len(mine) == 1, [f["kind"] for f in findings]
    return mine[0]


def test_a_loop_of_tiny_host_ops_is_launch_bound_with_cpu_advice(found):
    f = _one(found["launch_bound"], "launch_bound")
    assert (f["ranks"], f["steps"]) == ([0, 1], [0, *STEPS])
    # 400 tiny ops of ~6 µs and ~2 µs of Python between them: ~3.2 ms of a ~31 ms step
    assert 2.8 < f["evidence"]["host_ms_in_them_per_step"] < 3.6
    assert 8.0 < f["value"] < 13.0
    assert f["evidence"]["tiny_ops_per_step"] == 430  # the loop and the optimizer's 30
    assert f["evidence"]["ops"][0] == {"name": "aten::mul_", "count": 400 * 7 * 2}  # all ranks
    assert "vectorise" in f["advice"] and "torch.compile" in f["advice"]
    assert "CUDA" not in f["advice"]
    assert "tiny host ops" in f["summary"]


def test_a_large_block_made_and_dropped_every_step_is_allocator_churn(found):
    f = _one(found["allocator_churn"], "allocator_churn")
    assert (f["ranks"], f["steps"]) == ([0, 1, 2], [0, *STEPS])
    assert f["evidence"]["blocks_per_step"] == 1
    assert 2.8 < f["evidence"]["allocating_ops_ms_per_step"] < 3.2
    assert "jemalloc" in f["advice"] and "empty_cache" not in f["advice"]
    assert "gain_ms_per_step" not in f  # the ops' time is not all churn: no gain claimed


def test_a_clean_cpu_run_has_no_finding_and_both_rules_ran(found):
    assert list(found["clean"]) == []
    assert "launch_bound" not in found["clean"].coverage
    assert "allocator_churn" not in found["clean"].coverage
    assert "launch_bound" not in {f["kind"] for f in found["allocator_churn"]}
    assert "allocator_churn" not in {f["kind"] for f in found["launch_bound"]}


def test_without_memory_events_the_churn_rule_says_it_could_not_run(found):
    assert "allocator_churn" not in {f["kind"] for f in found["no_memory"]}
    why = found["no_memory"].coverage["allocator_churn"]
    assert why.startswith("could not run: a CPU-only run shows its allocations only in [memory]")
    assert "profile_memory=True" in why


def test_synchronize_in_step_says_why_a_cpu_run_has_nothing_for_it(found):
    why = found["launch_bound"].coverage["synchronize_in_step"]
    assert why.startswith("not applicable: the trace has no device events (a CPU-only run): ")
    assert ".item() on a CPU tensor waits for no device" in why
