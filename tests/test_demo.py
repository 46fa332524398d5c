"""`make demo` end to end: a real 2-rank job with a profiler schedule, its traces, table and plot."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hpcprof_kit import demo


@pytest.mark.timeout(300)
def test_demo_writes_the_run_directory_it_prints(isolated_runs):
    result = subprocess.run(
        [sys.executable, "-m", "hpcprof_kit", "demo"],
        capture_output=True, text=True, timeout=280,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    run_dir = Path(result.stdout.strip().splitlines()[-1])
    assert run_dir.parent == isolated_runs
    assert run_dir.name.startswith("train_local_N1_R2_")
    names = {p.name for p in run_dir.iterdir()}
    assert {"job.sh", "spec.json", "manifest.json", "stdout", "stderr"} <= names
    assert {"timeline.png", "summary.md", "summary.json"} <= names
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["state"] == "COMPLETED" and manifest["exit_code"] == 0
    traces = sorted(p.name for p in (run_dir / "traces").iterdir() if p.is_file())
    assert traces == ["trace-0-of-2.json", "trace-1-of-2.json"]
    assert (run_dir / "timeline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (
        "--prof-wait 1 --prof-warmup 1 --prof-active 2 --prof-repeat 1"
        in (run_dir / "job.sh").read_text()
    )

    summary = json.loads((run_dir / "summary.json").read_text())
    assert sorted(summary["ranks"]) == ["0", "1"]
    for rank, info in summary["ranks"].items():
        # wait=1, warmup=1, active=2: steps 2 and 3 are the recorded ones, on every rank
        assert info["steps"] == [2, 3], rank
        assert sorted(info["step_time_ms"]) == ["2", "3"]
        wall = sum(info["step_time_ms"].values())
        parts = sum(info["breakdown_ms"].values())
        assert parts == pytest.approx(wall, abs=0.01), "breakdown parts must add up to step time"
    # the table printed to the user is the one behind the summary
    assert "straggler" in result.stdout and "step" in result.stdout


@pytest.mark.timeout(200)
def test_a_failing_demo_keeps_its_stderr_and_says_failed(isolated_runs, monkeypatch):
    spec = demo.demo_spec()
    broken = spec.with_(args=(*spec.args, "--no-such-flag"))
    monkeypatch.setattr(demo, "demo_spec", lambda: broken)
    with pytest.raises(demo.DemoError, match="ended FAILED") as info:
        demo.run_demo(progress=False)
    run_dir = next(isolated_runs.iterdir())
    assert "unrecognized arguments: --no-such-flag" in (run_dir / "stderr").read_text()
    assert json.loads((run_dir / "manifest.json").read_text())["state"] == "FAILED"
    assert str(run_dir / "stderr") in str(info.value)
