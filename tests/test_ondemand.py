"""On-demand tracing: a running 2-rank job traced from outside; finished or silent runs say so."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from hpcprof_kit.errors import OnDemandError, SpecError
from hpcprof_kit.ondemand import dynolog_recipe, live_ranks, request_trace

GOLDEN = Path(__file__).parent / "golden" / "tracers"


def count_names(path, pattern):
    events = json.loads(Path(path).read_text())["traceEvents"]
    return sorted(
        e["name"] for e in events if e.get("ph") == "X" and re.fullmatch(pattern, e.get("name", ""))
    )


@pytest.mark.mpi
def test_on_demand_trace_of_a_running_two_rank_train_job(mpiexec, tmp_path):
    run_dir = tmp_path / "train_local_N1_R2"
    run_dir.mkdir()
    env = dict(os.environ, HPCPROF_RUN_DIR=str(run_dir), KINETO_LOG_LEVEL="6")
    app = [mpiexec, "-n", "2", sys.executable, "-m", "hpcprof_kit.ondemand", "--",
           "-m", "hpcprof_kit.apps.train", "--epochs", "100000", "--steps-per-epoch", "4"]  # fmt: skip
    job = subprocess.Popen(app, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while len(live_ranks(run_dir)) < 2:  # both ranks reached their first optimizer step set-up
            assert job.poll() is None, job.communicate()[1][-2000:]
            assert time.monotonic() < deadline, "the ranks never started"
            time.sleep(0.2)
        done = subprocess.run(
            [sys.executable, "-m", "hpcprof_kit", "trace", str(run_dir), "--steps", "3", "--timeout", "60"],
            capture_output=True, text=True, env=env, timeout=90,
        )  # fmt: skip
        assert job.poll() is None, "the job must still be running while it is traced"
    finally:
        job.terminate()
        job.communicate(timeout=30)
    assert done.returncode == 0, done.stderr
    req_id = re.search(r"on-demand trace (\S+): 3 optimizer steps", done.stdout).group(1)
    traces = sorted(p.name for p in (run_dir / "traces").glob("ondemand-*.json"))
    assert traces == [f"ondemand-{req_id}-0-of-2.json", f"ondemand-{req_id}-1-of-2.json"]
    for rank in (0, 1):
        trace = run_dir / "traces" / f"ondemand-{req_id}-{rank}-of-2.json"
        # One ProfilerStep per optimizer step, each holding that iteration's zero_grad.
        assert count_names(trace, r"ProfilerStep#\d+") == [
            "ProfilerStep#0",
            "ProfilerStep#1",
            "ProfilerStep#2",
        ]
        assert len(count_names(trace, r"Optimizer\.zero_grad#.*")) == 3
        ack = json.loads((run_dir / "ondemand" / "acks" / f"ack-{req_id}-{rank}.json").read_text())
        assert ack["ok"] and ack["last_step"] - ack["first_step"] == 2
        assert (
            f"rank {rank}: steps {ack['first_step']}-{ack['last_step']} -> traces/{trace.name}"
            in done.stdout
        )
    assert (run_dir / "tables" / f"ondemand-{req_id}-0-of-2.txt").is_file()


def test_request_for_a_finished_run_says_so(tmp_path):
    run_dir = tmp_path / "train_local_N1_R2_done"
    (run_dir / "ondemand" / "live").mkdir(parents=True)
    (run_dir / "manifest.json").write_text(json.dumps({"state": "COMPLETED"}))
    with pytest.raises(OnDemandError, match="has finished \\(manifest state COMPLETED\\)"):
        request_trace(run_dir, steps=2)
    (run_dir / "manifest.json").write_text(json.dumps({"state": "RUNNING"}))
    with pytest.raises(OnDemandError, match="no live ranks"):
        request_trace(run_dir, steps=2)
    with pytest.raises(OnDemandError, match="does not exist"):
        request_trace(tmp_path / "nowhere", steps=2)


def test_silent_ranks_are_named_after_the_timeout(tmp_path):
    from hpcprof_kit.ondemand.trigger import OnDemandTrigger

    run_dir = tmp_path / "run"
    # Rank 0 listens (in this process) but never steps; rank 1 is listed live and never answers.
    OnDemandTrigger(run_dir, rank=0, world_size=2)
    (run_dir / "ondemand" / "live" / "rank-1.json").write_text(
        json.dumps({"rank": 1, "world_size": 2})
    )
    with pytest.raises(
        OnDemandError, match=r"ranks answered: none; silent: 0, 1 \(no answer within 0.5 s\)"
    ):
        request_trace(run_dir, steps=1, timeout=0.5, poll=0.1)
    with pytest.raises(OnDemandError, match="steps=0 must be a whole number >= 1"):
        request_trace(run_dir, steps=0)


def test_trigger_records_exactly_n_steps_in_process(tmp_path):
    import torch

    from hpcprof_kit.ondemand.trigger import OnDemandTrigger

    trigger = OnDemandTrigger(tmp_path, rank=0, world_size=1)
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    handle = opt.register_step_post_hook(trigger.after_step)
    for i in range(8):
        if i == 2:
            (tmp_path / "ondemand" / "request-x1.json").write_text(json.dumps({"steps": 2}))
        opt.zero_grad()
        model(torch.ones(4)).sum().backward()
        opt.step()
    handle.remove()
    trigger.close()
    assert count_names(tmp_path / "traces" / "ondemand-x1-0-of-1.json", r"ProfilerStep#\d+") == [
        "ProfilerStep#0", "ProfilerStep#1",
    ]  # fmt: skip
    ack = json.loads((tmp_path / "ondemand" / "acks" / "ack-x1-0.json").read_text())
    assert (ack["first_step"], ack["last_step"]) == (4, 5)  # the request arrived during step 3
    assert not (tmp_path / "ondemand" / "live" / "rank-0.json").exists()


def test_broken_requests_are_logged_and_training_goes_on(tmp_path, caplog):
    import torch

    from hpcprof_kit.ondemand.trigger import OnDemandTrigger

    trigger = OnDemandTrigger(tmp_path, rank=0, world_size=1)
    model = torch.nn.Linear(4, 4)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    handle = opt.register_step_post_hook(trigger.after_step)
    folder = tmp_path / "ondemand"
    for i in range(8):
        if i == 1:  # half-written JSON, a JSON list, and a "file" that cannot be read
            (folder / "request-a1.json").write_text('{"steps": 2')
            (folder / "request-a2.json").write_text("[2]")
            (folder / "request-a3.json").mkdir()
        if i == 3:
            (folder / "request-b1.json").write_text(json.dumps({"steps": 2}))
        opt.zero_grad()
        model(torch.ones(4)).sum().backward()
        opt.step()
    handle.remove()
    trigger.close()
    assert trigger.steps_done == 8  # every step ran
    errors = {
        name: json.loads((folder / "acks" / f"ack-{name}-0.json").read_text())["error"]
        for name in ("a1", "a2", "a3")
    }
    assert errors["a1"].startswith("unreadable request: JSONDecodeError: ")
    assert errors["a2"] == "unreadable request: ValueError: a JSON object was expected, not list"
    assert errors["a3"].startswith("unreadable request: IsADirectoryError: ")
    logged = [r.getMessage() for r in caplog.records if r.name == "hpcprof_kit.ondemand.trigger"]
    assert [m.split(": ")[0] for m in logged] == [
        f"rank 0 ignores on-demand request {folder / f'request-{n}.json'}"
        for n in ("a1", "a2", "a3")
    ]
    good = json.loads((folder / "acks" / "ack-b1-0.json").read_text())
    assert good["ok"] and (good["first_step"], good["last_step"]) == (5, 6)


@pytest.mark.parametrize(("scheduler", "nodes", "ppn"), [("pbs", 2, 12), ("slurm", 4, 4)])
def test_dynolog_recipe_matches_golden_file(scheduler, nodes, ppn):
    golden = (GOLDEN / f"dynolog_{scheduler}.txt").read_text()
    assert dynolog_recipe(scheduler, nodes=nodes, ranks_per_node=ppn, iterations=5) == golden


def test_dynolog_recipe_bad_input():
    with pytest.raises(SpecError, match="scheduler 'lsf' has no dynolog recipe"):
        dynolog_recipe("lsf", 1, 1)
    with pytest.raises(SpecError, match="ranks_per_node=0 must be a whole number >= 1"):
        dynolog_recipe("pbs", 1, 0)
