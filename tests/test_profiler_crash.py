"""A rank that dies while profiling leaves the other ranks' traces whole and loadable."""

import subprocess
import sys

import pytest

from hpcprof_kit import traces

# Two independent ranks (no collectives, so the survivor is not dragged down): both profile
# steps 2-3 with trace writing at step 4; rank 1 dies in step 3, mid-recording.
SCRIPT = """
import os, sys, torch
from hpcprof_kit.ranks import ranks_from_env
from hpcprof_kit.profiling import make_profiler
info = ranks_from_env()
prof = make_profiler({"wait": 1, "warmup": 1, "active": 2, "repeat": 1},
                     trace_dir=sys.argv[1], rank=info.rank, world_size=info.world_size)
with prof:
    for step in range(6):
        torch.randn(64, 64) @ torch.randn(64, 64)
        if info.rank == 1 and step == 3:
            os._exit(3)  # a hard crash: no exception handler, no profiler exit
        prof.step()
"""


@pytest.mark.timeout(120)
def test_survivor_trace_is_intact_and_the_dead_rank_leaves_no_torn_file(mpiexec, tmp_path):
    trace_dir = tmp_path / "traces"
    result = subprocess.run(
        [mpiexec, "-n", "2", sys.executable, "-c", SCRIPT, str(trace_dir)],
        capture_output=True, text=True, timeout=100,
    )  # fmt: skip
    assert result.returncode != 0, "the job must report the crashed rank"
    files = sorted(p.name for p in trace_dir.iterdir() if p.is_file())
    assert files == ["trace-0-of-2.json"], files
    df = traces.load(trace_dir, cache=False)
    assert sorted(df["rank"].unique()) == [0]
    steps = sorted({n for n in df["name"].astype(str) if n.startswith("ProfilerStep#")})
    assert steps == ["ProfilerStep#2", "ProfilerStep#3"]
