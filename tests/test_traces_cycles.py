"""A repeating schedule's cycle files load as one run; a run directory loads like its traces/;
record_function ranges get their own table and timeline lane."""

from __future__ import annotations

import json
import shutil

import pytest

from hpcprof_kit import traces
from hpcprof_kit.errors import KitWarning, TraceFormatError
from hpcprof_kit.traces.plots.timeline import plot_timeline


@pytest.fixture(scope="module")
def two_cycles(tmp_path_factory):
    """A real one-rank run whose schedule repeats twice: mlp-0-of-1.json, mlp_cycle1-0-of-1.json."""
    import torch

    from hpcprof_kit.profiling import make_profiler, record_function

    run = tmp_path_factory.mktemp("mlp_local_N1_R1")
    (run / "manifest.json").write_text(json.dumps({"state": "COMPLETED"}))
    (run / "spec.json").write_text("{}")
    prof = make_profiler(schedule={"wait": 0, "warmup": 1, "active": 1, "repeat": 2},
                         activities="cpu", trace_dir=run / "traces", prefix="mlp")  # fmt: skip
    x = torch.ones(64, 64)
    with prof:
        for _ in range(5):
            with record_function("forward_block"):
                with record_function("inner"):
                    y = x @ x
                y.sum()
            prof.step()
    return run


def test_cycles_of_one_run_load_as_one_run_with_a_cycle_column(two_cycles):
    names = sorted(p.name for p in (two_cycles / "traces").glob("*.json"))
    assert names == ["mlp-0-of-1.json", "mlp_cycle1-0-of-1.json"]
    df = traces.load(two_cycles / "traces")
    steps = df[df["name"].astype(str).str.startswith("ProfilerStep#")]
    assert sorted(zip(steps["cycle"], steps["step"], strict=True)) == [(0, 1), (1, 3)]
    assert df.attrs["ranks"][0]["cycles"] == [0, 1]
    assert [p.rsplit("/", 1)[-1] for p in df.attrs["ranks"][0]["sources"]] == names
    assert traces.step_breakdown(df)["step"].tolist() == [1, 3]


def test_a_run_directory_loads_like_its_traces_folder(two_cycles):
    by_run = traces.load(two_cycles)  # manifest.json and spec.json are not traces
    by_folder = traces.load(two_cycles / "traces")
    assert len(by_run) == len(by_folder) and by_run.attrs["ranks"].keys() == {0}


def test_a_run_directory_without_traces_says_how_to_get_them(tmp_path):
    (tmp_path / "manifest.json").write_text("{}")
    with pytest.raises(TraceFormatError) as err:
        traces.load(tmp_path)
    assert str(err.value) == (
        f"{str(tmp_path)!r} is a run directory without a traces/ folder; run the job with "
        "profiling on (profile=True, or make_profiler in your script) to get traces"
    )


def test_files_of_two_runs_still_conflict(two_cycles, tmp_path):
    folder = tmp_path / "mixed"
    shutil.copytree(two_cycles / "traces", folder)
    shutil.copy(folder / "mlp-0-of-1.json", folder / "other-0-of-1.json")
    with pytest.raises(TraceFormatError) as err:
        traces.load(folder)
    assert str(err.value) == (
        f"two files claim rank 0: {folder / 'mlp-0-of-1.json'} and "
        f"{folder / 'other-0-of-1.json'} (their prefixes differ: 'mlp', 'other'); load them "
        "separately (they are different runs), e.g. one prefix at a time with a glob such as "
        "'traces/trace*', or rename one as <prefix>-<rank>-of-<world>.json"
    )
    assert len(traces.load(str(folder / "mlp*"))) == len(traces.load(two_cycles))
    shutil.copy(folder / "mlp-0-of-1.json", tmp_path / "mlp-0-of-1.json")
    with pytest.raises(TraceFormatError, match=r"\(both are cycle 0\)"):
        traces.load([folder / "mlp-0-of-1.json", tmp_path / "mlp-0-of-1.json"])


def test_record_function_ranges_table(two_cycles):
    table = traces.user_ranges(traces.load(two_cycles))
    assert sorted(table.index) == ["forward_block", "inner"]  # by self time: which varies
    assert table["count"].tolist() == [2, 2]  # the two recorded steps, one per cycle
    fwd, inner = table.loc["forward_block"], table.loc["inner"]
    assert fwd["self_ms"] == pytest.approx(fwd["total_ms"] - inner["total_ms"])
    assert list(table.columns) == ["count", "total_ms", "self_ms", "mean_us", "max_us", "share"]


def test_a_table_without_ranges_warns(two_cycles):
    df = traces.load(two_cycles)
    plain = df[df["cat"].astype(str) != "user_annotation"]
    with pytest.warns(KitWarning, match=r"^no record_function ranges in this trace table; wrap"):
        assert traces.user_ranges(plain).empty


def test_ranges_are_drawn_at_their_nesting_level(two_cycles):
    plot = plot_timeline(traces.load(two_cycles))
    levels = plot.bars.groupby("name")["depth"].agg(set)
    assert levels["forward_block"] == {1}  # inside the step
    assert levels["inner"] == {2}  # inside forward_block
    assert levels["aten::matmul"] == {3}
    assert int(plot.table["events"].sum()) == int(plot.bars["events"].sum())


def test_top_by_range_on_the_command_line(two_cycles, capsys):
    from hpcprof_kit.cli import main

    assert main(["traces", "top", str(two_cycles), "--by", "range"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:3] == ["count", "total_ms", "self_ms"]
    assert sorted(line.split()[:2] for line in out[1:]) == [["forward_block", "2"], ["inner", "2"]]
