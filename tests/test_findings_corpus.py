"""The diagnosis rules on generated problem runs (``diagnosis_corpus.py``, real Kineto files
loaded by the kit): each kind found on a run that has it, with its ranks and steps, and on
none without it; the unseen 8-rank H100 run of the issue; rules that cannot run say why."""

from __future__ import annotations

import warnings

import pytest
from diagnosis_corpus import KINDS, Problem, Run

from hpcprof_kit import traces
from hpcprof_kit.traces import findings as fnd
from hpcprof_kit.traces.view.run_view import RunView

SHAPE = {"ranks": 4, "steps": 6, "gemms": 6, "gemm_us": 1000.0, "jitter": 0.03}
EVERY = list(range(SHAPE["ranks"]))
ALL_STEPS = list(range(SHAPE["steps"]))
SIZES = {
    "straggler": 1.5,
    "pageable_copy": 40.0,  # MB: ~7 ms of a ~25 ms step
    "sync_copy": 40.0,
    "synchronize_in_step": 4.0,
    "data_loading": 5.0,
    "launch_bound": 300,
    "allocator_churn": 12,
    "no_tensor_cores": 3.0,
    "small_collectives": 150,
    "low_bus_bandwidth": 0.05,
}


def diagnose(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = traces.load(path)
    return fnd.find(RunView.of(df))


@pytest.fixture(scope="module")
def found(tmp_path_factory) -> dict[str, list[dict]]:
    root = tmp_path_factory.mktemp("corpus")
    out = {}
    for kind in (*KINDS, "clean"):
        problems = []
        if kind == "straggler":  # intermittent: rank 2 in steps 2 and 4 only
            problems = [Problem(kind, [2], [2, 4], SIZES[kind])]
        elif kind != "clean":
            problems = [Problem(kind, EVERY, ALL_STEPS, SIZES[kind])]
        run = Run(seed=11, problems=problems, **SHAPE)
        out[kind] = diagnose(run.write(root / kind))
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_each_planted_kind_is_found_with_its_ranks_and_steps(found, kind):
    mine = [f for f in found[kind] if f["kind"] == kind]
    assert len(mine) == 1, [f["kind"] for f in found[kind]]
    f = mine[0]
    if kind == "straggler":
        assert (f["ranks"], f["steps"]) == ([2], [2, 4])
        assert f["evidence"]["pattern"] == "intermittent"
    else:
        assert f["ranks"] == EVERY and f["steps"] == ALL_STEPS
    assert f["value"] >= f["threshold"] if kind != "low_bus_bandwidth" else f["value"] < 15
    assert f["gain_ms_per_step"] is None or f["gain_ms_per_step"] > 0


@pytest.mark.parametrize("kind", KINDS)
def test_no_kind_is_found_where_it_was_not_planted(found, kind):
    others = [k for k in found if k not in (kind, "clean")]
    for other in others:
        assert kind not in {f["kind"] for f in found[other]}, other


def test_a_clean_jittered_run_has_no_finding_and_every_rule_ran(found):
    assert list(found["clean"]) == []
    assert found["clean"].coverage == {}


def test_the_advice_names_what_the_issue_asks_for(found):
    advice = {f["kind"]: f["advice"] for fs in found.values() for f in fs}
    assert "TF32" in advice["no_tensor_cores"] and "bf16 autocast" in advice["no_tensor_cores"]
    assert "bucket_cap_mb" in advice["small_collectives"]
    assert "pin_memory" in advice["pageable_copy"]


def test_the_evidence_gives_bytes_and_bandwidth(found):
    page = next(f for f in found["pageable_copy"] if f["kind"] == "pageable_copy")
    assert page["evidence"]["mb_per_step"] == pytest.approx(40.0, rel=0.01)
    assert page["evidence"]["gb_per_s"] == pytest.approx(5.8, rel=0.06)
    slow = next(f for f in found["low_bus_bandwidth"] if f["kind"] == "low_bus_bandwidth")
    # 5 % of the 360 GB/s an H100 node's NVLink gives nccl-tests
    assert slow["evidence"]["bus_bandwidth_gbps"] == pytest.approx(18.0, rel=0.1)


def test_the_unseen_eight_rank_run_names_all_three_problems(tmp_path):
    """The issue's unseen H100-layout run: every step a 64 MB pageable copy (11 ms, host
    blocked); loss.item() then 4 ms of host logging between forward and backward; rank 6
    computing 1.8x slower in steps 3 and 5 only."""
    run = Run(
        ranks=8,
        steps=8,
        seed=2024,
        problems=[
            Problem("pageable_copy", list(range(8)), list(range(8)), 64.0),
            Problem("synchronize_in_step", list(range(8)), list(range(8)), 4.0),
            Problem("straggler", [6], [3, 5], 1.8),
        ],
    )
    found = {f["kind"]: f for f in diagnose(run.write(tmp_path))}
    assert {"pageable_copy", "synchronize_in_step", "straggler"} <= set(found)
    assert (found["straggler"]["ranks"], found["straggler"]["steps"]) == ([6], [3, 5])
    assert "in steps 3, 5 (intermittent)" in found["straggler"]["summary"]
    assert found["pageable_copy"]["evidence"]["ms_per_step"] == pytest.approx(11.0, rel=0.06)
    assert "step_variance" not in found  # the straggler explains the slow steps


def test_a_trace_without_steps_names_the_rules_it_could_not_run(tmp_path, capsys):
    run = Run(ranks=2, steps=3, seed=5, **{k: v for k, v in SHAPE.items() if k not in (
        "ranks", "steps")})  # fmt: skip
    run.write(tmp_path)
    import json

    for path in tmp_path.glob("*.json"):
        doc = json.loads(path.read_text())
        doc["traceEvents"] = [e for e in doc["traceEvents"]
                              if not e["name"].startswith("ProfilerStep#")]  # fmt: skip
        path.write_text(json.dumps(doc))
    found = diagnose(tmp_path)
    assert any("no ProfilerStep steps" in n for n in found.notes)
    for kind in ("straggler", "step_variance", "no_warmup", "synchronize_in_step"):
        assert "no ProfilerStep steps" in found.coverage[kind]
    # the rules that need no steps ran over the whole trace
    assert "pageable_copy" not in found.coverage and "allocator_churn" not in found.coverage
    from hpcprof_kit.traces.reporting.report import report

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        doc = report(tmp_path).to_dict()
    assert "no ProfilerStep steps" in doc["rules_not_run"]["straggler"]
    from hpcprof_kit.cli import main

    assert main(["traces", "report", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "not run: straggler: the trace has no ProfilerStep steps" in out
    assert "none of the rules triggered" not in out
    # the HTML report and the notebook display say the same
    from hpcprof_kit.traces.reporting.html import findings_html

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = report(tmp_path)
    html = findings_html(rep.findings, rep.run)
    assert "none of the rules triggered" not in html
    assert "<b>straggler</b>: the trace has no ProfilerStep steps" in html


def test_too_few_steps_is_said_not_guessed(tmp_path):
    run = Run(seed=3, problems=[Problem("straggler", [1], [0], 1.6)],
              **{**SHAPE, "steps": 1})  # fmt: skip
    found = diagnose(run.write(tmp_path))
    assert "straggler" not in {f["kind"] for f in found}
    assert found.coverage["straggler"] == "too few steps to say (1 whole step, 2 needed)"
    assert found.coverage["step_variance"] == "too few steps to say (1 whole step, 4 needed)"


def test_a_cpu_only_trace_lists_the_device_kinds_as_not_applicable():
    from pathlib import Path

    ddp = Path(__file__).parent / "fixtures" / "traces" / "ddp_cpu_2rank"
    found = diagnose(ddp)
    for kind in ("pageable_copy", "no_tensor_cores", "sync_copy", "synchronize_in_step"):
        assert found.coverage[kind].startswith("not applicable: the trace has no device")
    # the CPU twins run there: Adam's per-parameter loop (torch's default on the CPU) and the
    # tiny autograd nodes are ~620 ops under 25 µs a step; the trace was recorded without
    # [memory] events, so no churn rule
    tiny = next(f for f in found if f["kind"] == "launch_bound")
    assert tiny["evidence"]["tiny_ops_per_step"] > 500 and "foreach=True" in tiny["advice"]
    # Adam's per-parameter ops lead; a step's tiny autograd nodes are among the rest
    assert [o["name"] for o in tiny["evidence"]["ops"]][:2] == ["aten::add_", "aten::item"]
    assert found.coverage["allocator_churn"].startswith("could not run: a CPU-only run shows")


def test_the_vocabulary_in_the_docs_is_the_registry():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "report.md").read_text()
    block = text.split("<!-- vocabulary -->\n", 1)[1].split("<!-- /vocabulary -->", 1)[0]
    assert block == fnd.vocabulary()


def _beside(steps: int, tmp_path) -> list[dict]:
    """200 tiny kernels a step (each launch ~28 µs of host, the kernel 4 µs) beside a 20 ms
    DataLoader wait and fp32 GEMMs, which stretch the step to ~85 ms: the launches' share of
    it is under 5 %."""
    every = list(range(steps))
    run = Run(seed=7, problems=[Problem("launch_bound", EVERY, every, 200),
                                Problem("data_loading", EVERY, every, 20.0),
                                Problem("no_tensor_cores", EVERY, every, 3.0)],
              **{**SHAPE, "steps": steps})  # fmt: skip
    return diagnose(run.write(tmp_path))


def test_launch_bound_beside_other_host_problems_is_found_by_its_ms(tmp_path):
    found = {f["kind"]: f for f in _beside(8, tmp_path)}
    assert {"launch_bound", "data_loading", "no_tensor_cores"} <= set(found)
    f = found["launch_bound"]
    assert (f["ranks"], f["steps"]) == (EVERY, list(range(8)))
    assert 3.0 <= f["value"] < 5.0 and f["threshold"] == 3.0
    # those queued behind the batch copy start without a gap: not paced, not counted
    paced = f["evidence"]["tiny_kernels_per_step"]
    assert 140 <= paced <= 200
    assert f["gain_ms_per_step"] == pytest.approx(paced * 0.024, rel=0.15)  # ~24 µs idle each
    spread = f["evidence"]["step_spread_ms"]
    assert f["gain_ms_per_step"] > 3 * spread
    assert f"step-to-step spread ({spread:.2f} ms)" in f["summary"]


def test_launch_bound_under_its_threshold_needs_steps_enough_to_measure_the_spread(tmp_path):
    found = {f["kind"] for f in _beside(3, tmp_path)}
    assert "data_loading" in found and "launch_bound" not in found


def test_a_short_dataloader_wait_in_long_fp32_steps_is_found_by_its_ms(tmp_path):
    """2.5 ms a step waiting for the DataLoader beside fp32 GEMMs three times as long as
    bf16 ones (~65 ms steps): under 5 % of the step, far above its spread."""
    run = Run(seed=8, problems=[Problem("data_loading", EVERY, ALL_STEPS, 2.5),
                                Problem("no_tensor_cores", EVERY, ALL_STEPS, 3.0)],
              **SHAPE)  # fmt: skip
    found = {f["kind"]: f for f in diagnose(run.write(tmp_path))}
    assert set(found) == {"data_loading", "no_tensor_cores"}
    f = found["data_loading"]
    assert (f["ranks"], f["steps"]) == (EVERY, ALL_STEPS)
    assert 3.0 <= f["value"] < 5.0 and f["threshold"] == 3.0
    assert f["gain_ms_per_step"] == pytest.approx(2.5, rel=0.06)
    assert f["gain_ms_per_step"] > 3 * f["evidence"]["step_spread_ms"]
