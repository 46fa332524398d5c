"""The run report (issue #23): findings on runs built to have each problem and on runs built
not to have it, the panes of real CPU, CUDA and XPU traces, the CLI, and bad input.

The planted runs are Kineto traces of a CUDA DDP job written by ``tests/planted.py``: eight
ranks, 10 kernels of 2 ms a step, an NCCL all-reduce that ends when the last rank arrives.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from planted import Planted

from hpcprof_kit import traces
from hpcprof_kit.cli import main
from hpcprof_kit.errors import SpecError, TraceFormatError
from hpcprof_kit.traces.analyses.breakdown import rank_steps
from hpcprof_kit.traces.findings import FINDING_KINDS
from hpcprof_kit.traces.reporting.report import PANES, report

FIXTURES = Path(__file__).parent / "fixtures" / "traces"
THREE = {"slow": {5: 1.6}, "host_gap": {2: 6000.0}, "comm_us": 8000.0}


def kinds(rep) -> dict[str, list[int]]:
    return {f["kind"]: f["ranks"] for f in rep.findings}


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("planted")
    cases = {
        "clean": Planted(),
        "three": Planted(**THREE),
        "straggler": Planted(slow={5: 1.6}),
        "exposed": Planted(comm_us=8000.0),
        "host_gap": Planted(host_gap={2: 6000.0}),
        "short": Planted(kernel_us=4.0),
        "sync": Planted(sync_gap_us=3000.0),
        "warmup": Planted(step_factor={0: 2.0}),
        "variance": Planted(steps=8, step_factor={3: 1.5, 6: 1.5}),
        "noisy": Planted(jitter=0.03, seed=3),
    }
    return {name: run.write(root / name) for name, run in cases.items()}


def test_the_cli_finds_exactly_the_three_planted_problems_with_the_right_ranks(runs, capsys):
    assert main(["traces", "report", str(runs["three"]), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    found = {f["kind"]: f for f in doc["findings"]}
    assert sorted(found) == [
        "data_loading", "device_idle_host_bound", "exposed_communication", "straggler"
    ]  # fmt: skip
    assert found["data_loading"]["ranks"] == [2]  # the device idle is the DataLoader's
    assert found["straggler"]["ranks"] == [5]
    assert found["device_idle_host_bound"]["ranks"] == [2]
    assert found["exposed_communication"]["ranks"] == list(range(8))
    for f in doc["findings"]:
        assert set(f) >= {"kind", "ranks", "steps", "value", "threshold", "evidence", "advice"}
        assert f["value"] >= f["threshold"]
    # rank 5's kernels are 1.6x: 12 ms more work than the median rank in each step
    assert found["straggler"]["evidence"]["cost_ms_per_step"] == pytest.approx(12.0, rel=0.02)
    slower = found["straggler"]["evidence"]["slower_than_median_rank"][0]
    assert slower["ratio"] == pytest.approx(1.6, rel=0.02)
    # the 6 ms data-loading gap on rank 2 of a ~40 ms step
    assert found["device_idle_host_bound"]["value"] == pytest.approx(100 * 6 / 40.1, rel=0.03)
    assert set(doc["panes"]) == set(PANES)


def test_rank_steps_and_the_heatmap_name_the_same_straggler(runs):
    df = traces.load(runs["three"])
    steps = rank_steps(df)
    assert steps["straggler"].tolist() == [5] * 6
    assert (steps["tied"] == "").all()
    heat = traces.plot_rank_heatmap(df)
    assert heat.table["straggler"].tolist() == [5] * 6
    ax = heat.fig.axes[0]
    framed = [p for p in ax.patches if p.get_edgecolor()[:3] == (1.0, 0.0, 0.0)]
    assert len(framed) == 6 and {int(p.get_y() + 0.5) for p in framed} == {5}  # row 5: rank 5
    assert "rank 5 in 6 of 6 steps" in ax.get_title()
    # wall time alone cannot tell: every rank's step ends with the all-reduce
    walls = rank_steps(df, value="wall").drop(columns=["straggler", "tied", "cost_ms"])
    assert walls.drop(columns=["spread_ms", "spread_pct"]).nunique(axis=1).max() == 1


def test_a_clean_run_has_no_finding(runs, capsys):
    assert main(["traces", "report", str(runs["clean"])]) == 0
    out = capsys.readouterr().out
    assert "no finding" in out
    steps = rank_steps(traces.load(runs["clean"]))
    # the ranks are within 1 % of each other: a tie, not a straggler
    assert (steps["straggler"] == -1).all() and (steps["tied"] == "0,1,2,3,4,5,6,7").all()


def test_noise_of_three_percent_is_no_straggler(runs):
    assert kinds(report(runs["noisy"])) == {}


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("straggler", {"straggler": [5]}),
        ("exposed", {"exposed_communication": list(range(8))}),
        # a rank that loads data while its device idles is also the one the others wait for
        ("host_gap", {"straggler": [2], "device_idle_host_bound": [2], "data_loading": [2]}),
        ("warmup", {"no_warmup": list(range(8))}),
        # steps 3 and 6 slower on every rank: slow steps, every 3 steps, which explain the
        # variance (step_variance steps aside)
        ("variance", {"slow_steps": list(range(8))}),
    ],
)
def test_each_planted_problem_is_found_alone(runs, case, expected):
    assert kinds(report(runs[case])) == expected


def test_slow_steps_on_every_rank_say_when_and_what(runs):
    f = next(f for f in report(runs["variance"]).findings if f["kind"] == "slow_steps")
    assert f["steps"] == [3, 6] and f["evidence"]["period"] == 3
    assert "kernels running longer" in f["summary"] and f["lost_ms"] > 0


def test_short_kernels_and_a_sync_in_the_step(runs):
    short = report(runs["short"])
    assert kinds(short)["short_kernels"] == list(range(8))
    assert next(f for f in short.findings if f["kind"] == "short_kernels")["value"] == 100.0
    sync = {f["kind"]: f for f in report(runs["sync"]).findings}
    assert "synchronize_in_step" in sync
    # 3 ms of host work after the sync, the device idle, in a ~23 ms step
    assert sync["synchronize_in_step"]["value"] == pytest.approx(100 * 3 / 23.4, rel=0.05)
    assert "cudaStreamSynchronize" in sync["synchronize_in_step"]["evidence"]["calls"]
    for name in ("clean", "straggler", "exposed"):
        assert not {"short_kernels", "synchronize_in_step"} & set(kinds(report(runs[name])))


def test_one_rank_of_eight_is_named_and_its_waiting_qualified(runs):
    rep = report(runs["straggler"] / "trace-3-of-8.json")
    found = {f["kind"]: f for f in rep.findings}
    assert found["one_rank_only"]["ranks"] == [3]
    assert found["one_rank_only"]["evidence"] == {"world_size": 8, "traced": [3]}
    assert "only 1 of 8 ranks traced" in found["exposed_communication"]["summary"]
    assert "skew" in rep.panes["distributed"].missing


def test_graph_breaks_on_the_compiled_h100_run_and_not_on_the_eager_one():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = report(FIXTURES / "cuda_h100" / "compiled-0-of-1.json.gz")
        eager = report(FIXTURES / "cuda_h100" / "eager-0-of-1.json.gz")
    found = {f["kind"]: f for f in compiled.findings}
    assert found["graph_breaks"]["value"] == 3
    assert found["graph_breaks"]["evidence"]["regions"] == ["0/0", "1/0", "2/0"]
    assert "graph_breaks" not in kinds(eager)


def test_a_cpu_run_fills_what_it_can_and_says_why_not_the_rest():
    rep = report(FIXTURES / "ddp_cpu_2rank")
    kernels = rep.panes["kernels"]
    assert kernels.tables == {} and "CPU-only" in kernels.missing["top_kernels"]
    assert "no device" in rep.panes["overview"].missing["idle_split"]
    assert "profile_memory=True" in rep.panes["memory"].missing["peaks"]
    # rank 0 works 14 ms before the all-reduce, rank 1 8.5 ms: rank 0 is the straggler
    strag = rep.panes["distributed"].tables["stragglers"]
    assert strag["rank"].tolist() == [0, 1] and strag["straggler_steps"].tolist() == [2, 0]
    assert kinds(rep)["straggler"] == [0]
    doc = json.loads(rep.to_json())
    assert doc["panes"]["kernels"]["tables"] == {}


def test_the_xpu_sample_gets_kernels_and_launches(shared_traces):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = report(shared_traces / "xpu" / "atpesc_xpu_eager_sample.json")
    k = rep.panes["kernels"].tables
    assert len(k["top_kernels"]) > 0 and k["launches"]["launches"].iloc[0] > 0
    by = k["launched_by"]
    assert (by["op"] != "(no op found)").any()
    # its short kernels are many but not the kernel time (the GEMMs are): no short_kernels;
    # the sample kept blocks of whole events, so the device's empty time is not judged idle
    assert "short_kernels" not in kinds(rep) and "device_idle_host_bound" not in kinds(rep)
    assert rep.findings.coverage["device_idle_host_bound"].startswith("not judged: ")
    assert len(rep.panes["memory"].tables["peaks"]) > 0


def test_unknown_categories_are_counted_not_dropped(runs, tmp_path):
    doc = json.loads((runs["clean"] / "trace-0-of-8.json").read_text())
    doc["traceEvents"].append(
        {
            "ph": "X",
            "cat": "vendor_magic",
            "name": "x",
            "pid": 100,
            "tid": 100,
            "ts": 1100.0,
            "dur": 5.0,
        }
    )
    (tmp_path / "trace-0-of-1.json").write_text(json.dumps(doc))
    rep = report(tmp_path / "trace-0-of-1.json")
    cats = rep.panes["overview"].tables["categories"].set_index("cat")
    assert cats.loc["vendor_magic", "events"] == 1 and not cats.loc["vendor_magic", "known"]
    assert any("vendor_magic" in n for n in rep.panes["overview"].notes)


def test_bad_input_is_refused_with_the_fix(runs, tmp_path, capsys):
    out = tmp_path / "r.html"
    assert main(["traces", "report", str(runs["clean"]), "-o", str(out)]) == 0
    first = out.read_bytes()
    assert main(["traces", "report", str(runs["clean"]), "-o", str(out)]) == 2
    assert "--force" in capsys.readouterr().err and out.read_bytes() == first
    assert main(["traces", "report", str(runs["clean"]), "--top", "0"]) == 2
    assert "--top 1 or more" in capsys.readouterr().err
    with pytest.raises(TraceFormatError, match="empty"):
        report(traces.empty_table())
    with pytest.raises(SpecError, match="value='median'"):
        rank_steps(traces.load(runs["clean"]), value="median")


def test_ranks_of_two_runs_are_refused_as_load_refuses_them(runs, tmp_path):
    (tmp_path / "trace-0-of-8.json").symlink_to(runs["clean"] / "trace-0-of-8.json")
    other = tmp_path / "other"
    other.mkdir()
    (tmp_path / "b-0-of-8.json").symlink_to(runs["three"] / "trace-0-of-8.json")
    with pytest.raises(TraceFormatError) as refused:
        traces.load(tmp_path)
    with pytest.raises(TraceFormatError) as mine:
        report(tmp_path)
    assert str(mine.value) == str(refused.value)


def test_the_html_report_holds_every_pane_offline(runs, tmp_path):
    path = report(runs["three"]).write_html(tmp_path / "r.html")
    text = path.read_text()
    for pane in PANES:
        assert f'id="pane-{pane}"' in text
    assert "http://" not in text and "https://" not in text  # nothing fetched from a CDN
    assert text.count("data:image/png;base64,") >= 4
    assert "straggler" in text and "rank 5 works" in text


def test_the_vocabulary_is_documented():
    import hpcprof_kit.traces.findings as F

    for kind in FINDING_KINDS:
        assert f"``{kind}``" in F.__doc__


def test_the_notebook_view_draws_a_pane_when_its_tab_opens(runs):
    from hpcprof_kit.widgets.report import LATER

    rep = report(runs["three"])
    box = rep.show()
    top, tabs = box.children
    assert "rank 5 works" in top.value and "device_idle_host_bound" in top.value
    assert [tabs.get_title(i) for i in range(len(PANES))] == [rep.panes[p].title for p in PANES]
    first, *rest = tabs.children
    assert "data:image/png;base64," in first.value and all(c.value == LATER for c in rest)
    tabs.selected_index = PANES.index("distributed")
    drawn = tabs.children[PANES.index("distributed")].value
    assert drawn.count("data:image/png;base64,") == 2 and "stragglers" in drawn
    assert tabs.children[PANES.index("memory")].value == LATER


def _same_findings(a: list[dict], b: list[dict]) -> None:
    """The findings of per-rank summaries (``a``) against the table's (``b``): every field
    the same, gain and advice included, and every piece of evidence the summaries hold (the
    table's evidence adds what needs the events: the host ops, the calls by name)."""
    keys = ("kind", "ranks", "steps", "value", "threshold", "unit", "summary", "advice",
            "gain_ms_per_step")  # fmt: skip
    assert [{k: f.get(k) for k in keys} for f in a] == [{k: f.get(k) for k in keys} for f in b]
    for mine, theirs in zip(a, b, strict=True):
        held = {k: v for k, v in mine["evidence"].items() if v is not None}
        assert held == {k: theirs["evidence"].get(k) for k in held}, mine["kind"]


@pytest.mark.parametrize("case", ["three", "sync", "short", "warmup", "clean"])
def test_a_report_of_rank_summaries_finds_what_the_whole_table_finds(runs, case):
    from hpcprof_kit.traces.reporting.report import report_from_summary
    from hpcprof_kit.traces.view.summary import combine, summarise_rank

    whole = report(runs[case])
    summaries = [summarise_rank(traces.load(f)) for f in sorted(runs[case].glob("*.json"))]
    parts = report_from_summary(combine(summaries))
    _same_findings(parts.findings, whole.findings)
    for pane, name in [("distributed", "rank_steps"), ("distributed", "stragglers"),
                       ("distributed", "comm_overlap"), ("overview", "steps"),
                       ("overview", "breakdown"), ("overview", "utilisation")]:  # fmt: skip
        mine, theirs = parts.panes[pane].tables[name], whole.panes[pane].tables[name]
        assert mine.reset_index(drop=True).equals(theirs.reset_index(drop=True)), name
    assert "summaries" in parts.panes["memory"].missing["peaks"]


def test_the_graph_breaks_of_a_compiled_run_survive_its_summary():
    from hpcprof_kit.traces.reporting.report import report_from_summary
    from hpcprof_kit.traces.view.summary import summarise

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = traces.load(FIXTURES / "cuda_h100" / "compiled-0-of-1.json.gz")
    parts, whole = report_from_summary(summarise(df)).findings, report(df).findings
    assert {f["kind"] for f in whole} >= {"graph_breaks", "launch_bound"}
    _same_findings(parts, whole)


def test_report_as_an_mpi_job_gives_the_one_process_findings(mpiexec, runs, tmp_path):
    import subprocess
    import sys

    kit = str(Path(sys.executable).with_name("hpcprof-kit"))
    html = tmp_path / "mpi.html"
    done = subprocess.run(
        [mpiexec, "-n", "2", kit, "traces", "report", str(runs["three"]), "--mpi", "--json",
         "-o", str(html)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    _same_findings(doc["findings"], json.loads(report(runs["three"]).to_json())["findings"])
    assert 'id="pane-distributed"' in html.read_text()


def test_user_ranges_give_device_time_without_gpu_annotations(runs, tmp_path):
    """XPU traces have no gpu_user_annotation copy of a range: the device time is that of the
    kernels the range launched (here a CUDA-layout run without the copies)."""
    doc = json.loads((runs["clean"] / "trace-0-of-8.json").read_text())
    events = doc["traceEvents"]
    step0 = next(e for e in events if e["name"] == "ProfilerStep#0")
    launches = [e for e in events if e["name"] == "cudaLaunchKernel"][:5]
    start, end = launches[0]["ts"] - 1.0, launches[-1]["ts"] + 1.0
    events.append({"ph": "X", "cat": "user_annotation", "name": "forward", "pid": 100,
                   "tid": 100, "ts": start, "dur": end - start, "args": {}})  # fmt: skip
    assert start >= step0["ts"]
    corr = {e["args"]["correlation"] for e in launches}
    expected = sum(
        e["dur"] for e in events if e["cat"] == "kernel" and e["args"]["correlation"] in corr
    )
    (tmp_path / "trace-0-of-1.json").write_text(json.dumps(doc))
    table = traces.user_ranges(traces.load(tmp_path / "trace-0-of-1.json"))
    assert table.loc["forward", "device_ms"] == pytest.approx(expected / 1e3, abs=1e-6)
