"""``hpcprof-kit traces ...`` and ``hpcprof-kit timings`` on real traces and timing files."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from hpcprof_kit import traces
from hpcprof_kit import traces as A
from hpcprof_kit.cli import main

RANK0 = "hta/cuda_rank0_of_128.json.gz"


@pytest.mark.shared_traces
def test_summary_prints_per_rank_breakdown_totals(shared_traces, capsys):
    path = str(shared_traces / "hta" / "cuda_rank*_of_128.json.gz")
    assert main(["traces", "summary", path]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["rank", "kind", "events", "steps", "wall_ms", "compute_ms",
                                "hidden_comm_ms", "exposed_comm_ms", "memory_ms", "host_ms",
                                "idle_ms"]  # fmt: skip
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = traces.load(path)
    bd = A.step_breakdown(df)
    overlap = A.comm_overlap(df).set_index("rank")
    for line, rank in zip(lines[1:3], (0, 1), strict=True):
        mine = bd[bd["rank"] == rank]
        fields = line.split()
        assert fields[:4] == [str(rank), "device", str((df["rank"] == rank).sum()), "2"]
        assert float(fields[7]) == pytest.approx(mine["exposed_comm_ns"].sum() / 1e6, abs=1e-3)
        # the CUDA trace's breakdown and overlap agree: the same exposed NCCL time
        assert mine["exposed_comm_ns"].sum() == overlap.loc[rank, "exposed_ns"]


@pytest.mark.shared_traces
def test_summary_json_and_top_kernels(shared_traces, capsys):
    assert main(["traces", "summary", str(shared_traces / RANK0), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["rank"], row["steps"], row["kind"]) == (0, 2, "device")
    parts = sum(row[f"{p}_ms"] for p in A.PARTS)
    assert parts == pytest.approx(row["wall_ms"], abs=0.01)
    assert main(["traces", "top", str(shared_traces / RANK0), "--by", "kernel", "-n", "3"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 4 and out[1].startswith("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(")
    assert (
        main(
            [
                "traces",
                "top",
                str(shared_traces / "hta/cpu_rank34_of_300.json.gz"),
                "--by",
                "kernel",
            ]
        )
        == 1
    )
    assert "no kernels in this trace" in capsys.readouterr().out


@pytest.mark.shared_traces
def test_plot_and_merge_never_overwrite_without_force(shared_traces, tmp_path, capsys):
    for kind in ("timeline", "breakdown", "heatmap"):
        out = tmp_path / f"{kind}.png"
        assert (
            main(["traces", "plot", str(shared_traces / RANK0), "-o", str(out), "--kind", kind])
            == 0
        )
        assert out.read_bytes()[:4] == b"\x89PNG"
    capsys.readouterr()
    for action, name in (("plot", "taken.png"), ("merge", "merged.json")):
        taken = tmp_path / name
        taken.write_text("keep me")
        assert main(["traces", action, str(shared_traces / RANK0), "-o", str(taken)]) == 2
        assert capsys.readouterr().err == (
            f"hpcprof-kit traces: -o {taken} exists already; pick a new file name, or pass "
            "--force to replace it\n"
        )
        assert taken.read_text() == "keep me"
        assert (
            main(["traces", action, str(shared_traces / RANK0), "-o", str(taken), "--force"]) == 0
        )
        assert taken.read_bytes() != b"keep me"


def test_timings_subcommand_compute_vs_comm(tmp_path, capsys):
    folder = tmp_path / "seqpar_local_N1_R1" / "timings"
    folder.mkdir(parents=True)
    record = {"app": "seqpar", "rank": 0, "world_size": 1, "nodes": 1, "dtype": "bfloat16",
              "timings": {"matmul_1": [0.002, 0.004], "all_gather": [0.001, 0.001], "step": [0.004, 0.006]}}  # fmt: skip
    (folder / "seqpar-0-of-1.json").write_text(json.dumps(record))
    assert (
        main(["timings", str(folder.parent), "--compute-vs-comm", "-o", str(tmp_path / "c.png")])
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == [
        "seqpar",
        "bfloat16",
        "1",
        "1",
        "3.000",
        "1.000",
        "1.000",
        "5.000",
        "0.200",
    ]
    assert (tmp_path / "c.png").exists()
    assert main(["timings", str(tmp_path / "missing")]) == 2


@pytest.mark.shared_traces
def test_the_installed_command_runs(shared_traces):
    cmd = [
        sys.executable,
        "-m",
        "hpcprof_kit",
        "traces",
        "summary",
        str(shared_traces / RANK0),
        "--json",
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=60)
    assert json.loads(done.stdout)[0]["events"] > 4000


@pytest.mark.shared_traces
def test_merge_writes_one_perfetto_file_for_all_ranks(shared_traces, tmp_path, capsys):
    path = str(shared_traces / "hta" / "cuda_rank*_of_128.json.gz")
    out = tmp_path / "merged.json"
    assert main(["traces", "merge", path, "-o", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    merged = json.loads(out.read_text())
    assert sorted(merged["hpcprofRankOffsetsNs"]) == ["0", "1"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = traces.load(path)
    complete = sum(1 for e in merged["traceEvents"] if e.get("ph") == "X")
    assert complete == int((df["track"] != "instant").sum())  # every complete event of both ranks


def test_summary_takes_several_paths_one_rank_each(tmp_path, capsys):
    fixtures = Path(__file__).parent / "fixtures" / "traces"
    shutil.copy(fixtures / "kineto_xpu-1-of-2.json", tmp_path / "x-1-of-2.json")
    shutil.copy(fixtures / "myapp.4321.1.json", tmp_path / "myapp.4321.0.json")
    paths = [str(tmp_path / "x-1-of-2.json"), str(tmp_path / "myapp.*.json")]
    assert main(["traces", "summary", *paths, "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["rank"] for row in rows] == [0, 1]
    assert rows[1]["events"] == len(traces.load(tmp_path / "x-1-of-2.json", cache=False))
