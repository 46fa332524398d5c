"""The report's panes say what happened and do not mislead: an intermittent straggler shows
per step (rank and steps named, its cost what the others measured waiting), the idle split
is per stream with no summed row, launch delay is told apart from the host running ahead,
communication is split into transfer and waiting, every pane is in ms and rounded, and each
finding's evidence in the HTML is a short table.

Runs are Kineto traces of a CUDA DDP job written by ``tests/planted.py`` (a stand-in for a
GPU run: eight ranks, 10 kernels of 2 ms a step, an NCCL all-reduce that ends when the last
rank arrives plus its transfer time).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from planted import KERNELS, Planted

from hpcprof_kit.traces.analyses.device_idle import idle_split
from hpcprof_kit.traces.reporting.report import report


class Intermittent(Planted):
    """A planted run whose ``slow_in`` (rank, step) -> factor slows one rank in some steps."""

    def __init__(self, slow_in: dict[tuple[int, int], float], **kw):
        super().__init__(**kw)
        self.slow_in = slow_in

    def _kernels(self) -> np.ndarray:
        dur = super()._kernels()
        for (rank, step), factor in self.slow_in.items():
            dur[step, rank] *= factor
        return dur


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple[Planted, Path]]:
    root = tmp_path_factory.mktemp("panes")
    cases = {
        "intermittent": Intermittent({(6, 3): 1.8, (6, 5): 1.8}, steps=8, comm_us=2000.0),
        "three": Planted(slow={5: 1.6}, host_gap={2: 6000.0}, comm_us=8000.0),
        "clean": Planted(),
    }
    return {name: (run, run.write(root / name)) for name, run in cases.items()}


@pytest.fixture(scope="module")
def reports(runs):
    return {name: report(path) for name, (_, path) in runs.items()}


def test_an_intermittent_straggler_is_named_with_its_steps_where_medians_hide_it(runs, reports):
    rep = reports["intermittent"]
    steps = rep.panes["overview"].tables["steps"].set_index("rank")
    # the medians of rank 6 look like everyone's: the per-step columns do not
    assert steps.loc[6, "worked_median_ms"] == pytest.approx(
        steps["worked_median_ms"].median(), rel=0.01
    )
    assert steps.loc[6, "straggler_in_steps"] == "3,5"
    assert set(steps.drop(index=6)["straggler_in_steps"]) == {""}
    assert steps.loc[6, "worked_max_ms"] == pytest.approx(
        1.8 * steps.loc[0, "worked_max_ms"], rel=0.02
    )
    view = rep.panes["overview"].tables["rank_by_step"].set_index("step")
    assert [c for c in view.columns if c.startswith("rank ")] == [f"rank {r}" for r in range(8)]
    named = view["straggler"]
    assert named[[3, 5]].tolist() == [6, 6] and (named.drop(index=[3, 5]) != 6).all()
    assert view.loc[3, "rank 6"] == pytest.approx(1.8 * view.loc[3, "rank 0"], rel=0.02)


def test_the_stragglers_cost_is_what_the_others_measured_waiting(runs, reports):
    run, _ = runs["intermittent"]
    rep = reports["intermittent"]
    view = rep.panes["distributed"].tables["rank_steps"].set_index("step")
    for step in (3, 5):
        _, _, arrive = run._layout()[step]
        # each other rank waits in the all-reduce from its arrival until rank 6 arrives
        waited = np.median(np.delete(arrive.max() - arrive, 6)) / 1e3
        assert view.loc[step, "cost_ms"] == pytest.approx(waited, abs=0.002)
        assert waited == pytest.approx(0.8 * KERNELS * 2.0, rel=0.02)  # 16 ms of 20
    b = rep.breakdown
    exposed = b[b["step"] == 3].set_index("rank")["exposed_comm_ns"] / 1e6
    measured = float(np.median(exposed.drop(index=6) - exposed[6]))
    assert view.loc[3, "cost_ms"] == pytest.approx(measured, abs=0.001)


def test_straggler_kernels_compare_the_steps_where_it_straggled(reports):
    table = reports["intermittent"].panes["distributed"].tables["straggler_kernels"]
    assert table[["rank", "steps"]].values.tolist() == [[6, "3,5"]]
    assert table["ratio"].iloc[0] == pytest.approx(1.8, rel=0.02)
    assert table["rank_median_ms"].iloc[0] == pytest.approx(3.6, rel=0.02)


def test_no_straggler_says_why_straggler_kernels_is_absent(reports):
    pane = reports["clean"].panes["distributed"]
    assert "straggler_kernels" not in pane.tables
    assert "no step has a straggler" in pane.missing["straggler_kernels"]


def test_idle_split_is_per_stream_in_ms_without_a_summed_row(runs, reports):
    _, path = runs["three"]
    table = reports["three"].panes["overview"].tables["idle_split"]
    assert -1 not in set(table["stream"])
    rank0 = table[table["rank"] == 0].set_index("stream")
    assert rank0["runs"].to_dict() == {7: "compute", 20: "communication"}
    from hpcprof_kit import traces

    exact = idle_split(traces.load(path)).set_index(["rank", "stream"])
    for stream in (7, 20):
        ns = int(exact.loc[(0, stream), "idle_ns"])
        assert rank0.loc[stream, "idle_ms"] == round(ns / 1e6, 3)


def test_comm_pct_is_transfer_and_waiting_is_apart(runs, reports):
    run, _ = runs["three"]
    util = reports["three"].panes["overview"].tables["utilisation"].set_index("rank")
    layout = run._layout()
    wall = sum(w for _, w, _ in layout)
    # rank 5 (1.6x slower) arrives last: it waits for nothing but the 8 ms transfer
    transfer = 100 * len(layout) * run.comm_us / wall
    assert util["comm_pct"].tolist() == pytest.approx([transfer] * 8, abs=0.1)
    assert util.loc[5, "comm_waiting_pct"] == 0.0
    waited0 = 100 * sum(a.max() - a[0] for _, _, a in layout) / wall
    assert util.loc[0, "comm_waiting_pct"] == pytest.approx(waited0, abs=0.1)
    assert waited0 > 25  # about 12 ms of each 40 ms step


def test_launch_delay_is_told_apart_from_the_host_running_ahead(reports):
    """The host launches a step's kernels within 0.2 ms; the device runs them one after the
    other for 20 ms: HTA counts nearly every launch as a delay outlier, the kit as queued."""
    launches = reports["clean"].panes["kernels"].tables["launches"].set_index("rank")
    assert launches["launches"].tolist() == [55] * 8  # HTA's window: the last step left out
    assert launches["hta_delay_outliers"].tolist() == [50] * 8
    assert launches["queued"].tolist() == [50] * 8
    assert launches["delay_outliers"].tolist() == [0] * 8
    assert (launches["own_delay_p90_ms"] < 0.01).all()
    assert (launches["delay_p50_ms"] > 5).all()


def test_every_pane_is_in_ms_and_rounded(reports):
    for rep in reports.values():
        for pane in rep.panes.values():
            for name, table in pane.tables.items():
                units = [c for c in map(str, table.columns) if re.search(r"_(ns|us)$", c)]
                assert not units, (name, units)
                for col in table.columns:
                    if table[col].dtype.kind != "f":
                        continue
                    places = 1 if str(col).endswith("_pct") else 3
                    values = table[col].dropna().to_numpy()
                    assert np.array_equal(values, np.round(values, places)), (name, col)


def test_html_evidence_is_a_table_in_ms_naming_the_events(reports, tmp_path):
    rep = reports["three"]
    page = rep.write_html(tmp_path / "report.html").read_text()
    findings = page.split("<h2>Findings</h2>")[1].split("<nav>")[0]
    assert "<pre>" not in findings and "{" not in findings  # no JSON dump
    straggler = findings.split('<span class="kind">straggler</span>')[1].split("</div>")[0]
    assert '<table class="evidence">' in straggler
    assert "<th>cost per step</th><td>12.0" in straggler
    assert "rank median (ms)</th>" in straggler and "<td>3.2" in straggler
    assert "cutlass_80_tensorop_s1688gemm" in straggler
    # the rank x step heatmap is the overview's first plot, the first tab shown
    overview = page.split('id="pane-overview"')[1]
    assert overview.index("<h3>rank_heatmap</h3>") < overview.index("<h3>breakdown</h3>")
