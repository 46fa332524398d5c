"""A learner's script that never calls prof.step(), never exports, or exports where the job's
run directory is not gets a loader error naming the missing call and the fix, not a bare "no
trace files" (real scripts, real local jobs with 2 ranks through Hydra mpiexec)."""

from __future__ import annotations

import pytest

from hpcprof_kit import traces
from hpcprof_kit.errors import TraceFormatError
from hpcprof_kit.jobs import JobSpec, submit, wait_for
from hpcprof_kit.profiling.script_check import check_profiler_script

GOOD = """
import os
import torch
from torch.profiler import ProfilerActivity, profile, schedule

rank, world = int(os.environ.get("PMI_RANK", 0)), int(os.environ.get("PMI_SIZE", 1))
prof = profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=1))
prof.start()
for step in range(4):
    torch.randn(32, 32) @ torch.randn(32, 32)
    STEP
prof.stop()
os.makedirs("traces", exist_ok=True)
EXPORT
"""
STEP, EXPORT = "prof.step()", 'prof.export_chrome_trace(f"traces/mine-{rank}-of-{world}.json")'
SCRIPTS = {
    "good": GOOD.replace("STEP", STEP).replace("EXPORT", EXPORT),
    "no_step": GOOD.replace("STEP", "pass").replace("EXPORT", EXPORT),
    "no_export": GOOD.replace("STEP", STEP).replace("EXPORT", "print('done')"),
    "outside": GOOD.replace("STEP", STEP).replace(
        "EXPORT", 'prof.export_chrome_trace(f"{OUTSIDE}/mine-{rank}-of-{world}.json")'
    ),
}
WANT = {
    "no_step": "mine.py never calls prof.step(): with a schedule the profiler records nothing",
    "no_export": "mine.py never exports a trace: call prof.export_chrome_trace(f'traces/",
    "outside": "exports to '{OUTSIDE}/mine-{...}-of-{...}.json', an absolute path outside",
}


def _run(tmp_path, name: str):
    outside = tmp_path / "elsewhere"
    outside.mkdir(exist_ok=True)
    script = tmp_path / name / "mine.py"
    script.parent.mkdir()
    script.write_text(SCRIPTS[name].replace("{OUTSIDE}", str(outside)))
    job = submit(JobSpec(system="local", ranks_per_node=2, command=["python3", str(script)]))
    state = wait_for(job, timeout=300, progress=False)
    # without prof.step() the schedule never reaches its active steps and the export raises
    assert state == ("FAILED" if name == "no_step" else "COMPLETED"), job.tail(stream="stderr")
    return job, outside


@pytest.mark.mpi
def test_a_good_script_gives_one_trace_per_rank(tmp_path):
    job, _ = _run(tmp_path, "good")
    df = traces.load(job.run_dir / "traces", cache=False)
    assert sorted(df["rank"].unique()) == [0, 1]


@pytest.mark.mpi
@pytest.mark.parametrize("name", ["no_step", "no_export", "outside"])
def test_the_missing_call_is_named(tmp_path, name):
    job, outside = _run(tmp_path, name)
    with pytest.raises(TraceFormatError) as err:
        traces.load(job.run_dir / "traces", cache=False)
    text = str(err.value)
    assert "no trace files at" in text or "without a traces/ folder" in text
    assert WANT[name].replace("{OUTSIDE}", str(outside)) in text, text


def test_a_run_that_did_not_complete_says_so(tmp_path):
    run = tmp_path / "run"
    (run / "traces").mkdir(parents=True)
    (run / "manifest.json").write_text('{"state": "FAILED", "exit_code": 1}')
    with pytest.raises(TraceFormatError, match=r"Why: the run is FAILED \(exit code 1\): see"):
        traces.load(run / "traces", cache=False)


def test_exports_to_another_relative_folder_are_named():
    text = GOOD.replace("STEP", STEP).replace("EXPORT", 'prof.export_chrome_trace("out/t.json")')
    assert check_profiler_script(text) == [
        "exports to 'out/t.json': the kit reads <run>/traces/; write "
        "'traces/<name>-{rank}-of-{world}.json', or load that folder yourself"
    ]
    assert check_profiler_script(SCRIPTS["good"]) == []
    assert check_profiler_script("import torch\n") == [
        "creates no torch.profiler.profile(...): nothing was profiled"
    ]
