"""``hpcprof-kit render | submit | status | cancel | runs`` as a user types them."""

from __future__ import annotations

import json
import subprocess
import sys

from hpcprof_kit.jobs import JobSpec

KIT = [sys.executable, "-m", "hpcprof_kit"]


def kit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*KIT, *args], capture_output=True, text=True, timeout=120)


def test_render_prints_the_exact_script_and_writes_a_file(tmp_path):
    args = ["--system", "polaris", "--nodes", "2", "--ranks-per-node", "4", "--account", "P",
            "--queue", "debug-scaling", "--walltime", "00:30:00", "--name", "mine", "--profile"]  # fmt: skip
    done = kit("render", *args)
    spec = JobSpec(system="polaris", nodes=2, ranks_per_node=4, account="P",
                   queue="debug-scaling", walltime="00:30:00", name="mine", profile=True)  # fmt: skip
    assert done.returncode == 0 and done.stdout == spec.render()
    out = tmp_path / "job.sh"
    assert kit("render", *args, "-o", str(out)).returncode == 0
    assert out.read_text() == spec.render()


def test_render_error_goes_to_stderr_with_nonzero_exit():
    done = kit("render", "--system", "aurora", "--account", "P", "--walltime", "02:00:00")
    assert done.returncode == 2 and done.stdout == ""
    assert "walltime 02:00:00 exceeds queue debug's 01:00:00 on aurora" in done.stderr


def test_submit_wait_status_cancel_and_runs_table(isolated_runs):
    done = kit("submit", "--system", "local", "--example", "affinity", "--ranks-per-node", "1",
               "--binding", "none", "--wait")  # fmt: skip
    lines = done.stdout.splitlines()
    assert lines[0].startswith("run directory: ") and lines[1].startswith("job id: local-")
    run_dir = lines[0].split(": ", 1)[1]
    state = json.loads(kit("status", run_dir, "--json").stdout)
    assert lines[2] == f"state: {state['state']} (exit code {state['exit_code']})"
    assert done.returncode == (0 if state["state"] == "COMPLETED" else 1)
    assert state["job_id"] == lines[1].split(": ", 1)[1]
    table = kit("runs").stdout.splitlines()
    assert table[0].split() == ["RUN", "BACKEND", "JOB", "ID", "STATE", "EXIT"]
    assert table[1].split()[:4] == [
        run_dir.rsplit("/", 1)[1],
        "local",
        state["job_id"],
        state["state"],
    ]
    cancel = kit("cancel", run_dir)
    assert cancel.stdout.strip() == state["state"]  # an ended job stays as it ended
