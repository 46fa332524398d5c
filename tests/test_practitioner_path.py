"""The practitioner's path end to end: an own DDP script, submitted with the CLI as
``hpcprof-kit submit ... -- python mlp.py``, profiled by the kit's factory over two cycles,
loaded as one run, read as a breakdown that agrees with the overlap table."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from hpcprof_kit import traces
from hpcprof_kit.cli import main

# What a practitioner writes after reading the README: a small MLP on random data, DDP over
# gloo, the kit's rank/device set-up and profiler factory; nothing else of the kit's.
MLP_SCRIPT = textwrap.dedent(
    """
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    from hpcprof_kit.dist import distributed
    from hpcprof_kit.profiling import make_profiler, record_function

    with distributed(backend="gloo") as info:
        print(info.banner() + "\\n", end="", flush=True)  # one write: ranks share stdout
        torch.manual_seed(0)
        net = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                                  torch.nn.Linear(512, 10))
        model = DDP(net)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        prof = make_profiler(schedule={"wait": 1, "warmup": 1, "active": 2, "repeat": 2},
                             rank=info.rank, world_size=info.world_size, prefix="mlp")
        with prof:
            for step in range(10):
                x, y = torch.randn(64, 256), torch.randint(0, 10, (64,))
                with record_function("forward"):
                    loss = torch.nn.functional.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                prof.step()
    """
)


@pytest.fixture(scope="module")
def mlp_run(tmp_path_factory) -> Path:
    """The run directory of ``hpcprof-kit submit --system local --wait -- python mlp.py``,
    typed in the folder that holds mlp.py (a relative path, resolved at submit time)."""
    home = tmp_path_factory.mktemp("practitioner")
    (home / "mlp.py").write_text(MLP_SCRIPT)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(home)
        mp.setenv("HPCPROF_RUNS_DIR", str(home / "runs"))
        mp.setenv("HPCPROF_WORKSHOP", "off")
        from io import StringIO

        out = StringIO()
        mp.setattr("sys.stdout", out)
        code = main(["submit", "--system", "local", "--ranks-per-node", "2", "--wait",
                     "--", "python", "mlp.py"])  # fmt: skip
    lines = out.getvalue().splitlines()
    run_dir = Path(lines[0].split(": ", 1)[1])
    assert code == 0, (run_dir / "stderr").read_text()
    assert lines[2] == "state: COMPLETED (exit code 0)"
    return run_dir


@pytest.mark.mpi
def test_own_script_job_is_named_after_the_script_and_finds_it(mlp_run):
    home = mlp_run.parent.parent
    assert mlp_run.parent == home / "runs" and mlp_run.name.startswith("mlp_local_N1_R2_")
    script = (mlp_run / "job.sh").read_text().splitlines()
    assert "# mlp on local: a custom command" in script
    assert script[-1].strip() == f"python {home / 'mlp.py'}"
    spec = json.loads((mlp_run / "spec.json").read_text())
    assert (spec["command"], spec["profile"]) == (["python", str(home / "mlp.py")], False)
    stdout = (mlp_run / "stdout").read_text()
    assert sorted(re.findall(r"(?<!_)rank=(\d) local_rank=\d world=2", stdout)) == ["0", "1"]


@pytest.mark.mpi
def test_all_cycles_load_as_one_run_and_the_breakdown_agrees_with_the_overlap(mlp_run):
    assert sorted(p.name for p in (mlp_run / "traces").glob("*.json")) == [
        "mlp-0-of-2.json", "mlp-1-of-2.json", "mlp_cycle1-0-of-2.json", "mlp_cycle1-1-of-2.json"
    ]  # fmt: skip
    df = traces.load(mlp_run)  # the run directory itself
    steps = df[df["name"].astype(str).str.startswith("ProfilerStep#")]
    assert sorted(set(zip(steps["rank"], steps["cycle"], steps["step"], strict=True))) == [
        (0, 0, 2), (0, 0, 3), (0, 1, 6), (0, 1, 7), (1, 0, 2), (1, 0, 3), (1, 1, 6), (1, 1, 7)
    ]  # fmt: skip
    bd = traces.step_breakdown(df)
    assert bd[["rank", "step"]].values.tolist() == [
        [0, 2], [0, 3], [0, 6], [0, 7], [1, 2], [1, 3], [1, 6], [1, 7]
    ]  # fmt: skip
    parts = [
        f"{p}_ns" for p in ("compute", "hidden_comm", "exposed_comm", "memory", "host", "idle")
    ]
    assert (bd[parts].sum(axis=1) == bd["wall_ns"]).all()
    assert ((bd["hidden_comm_ns"] + bd["exposed_comm_ns"]) > 0).all(), "DDP all-reduces each step"
    overlap = traces.comm_overlap(df)
    per_rank = bd.groupby("rank")
    assert overlap["exposed_ns"].tolist() == per_rank["exposed_comm_ns"].sum().tolist()
    assert overlap["hidden_ns"].tolist() == per_rank["hidden_comm_ns"].sum().tolist()
    ranges = traces.user_ranges(df)
    assert ranges.loc["forward", "count"] == 2 * 4  # 2 ranks x 4 recorded steps


@pytest.mark.mpi
def test_status_by_name_from_outside_the_runs_root(mlp_run, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HPCPROF_RUNS_DIR", str(mlp_run.parent))
    monkeypatch.chdir(tmp_path)  # nowhere near the runs
    assert main(["status", mlp_run.name]) == 0
    job_id = json.loads((mlp_run / "manifest.json").read_text())["job_id"]
    assert capsys.readouterr().out == f"COMPLETED  job {job_id}  exit code 0\n"
