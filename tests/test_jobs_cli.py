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
    assert (state["state"], state["exit_code"]) == ("COMPLETED", 0), done.stderr
    assert lines[2] == "state: COMPLETED (exit code 0)"
    assert done.returncode == 0
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


def test_render_takes_profrank_rankcutoff_and_filesystems(capsys):
    from hpcprof_kit.cli import main

    args = ["--system", "aurora", "--nodes", "2", "--ranks-per-node", "12", "--account", "P",
            "--queue", "debug-scaling", "--tracer", "unitrace", "--profrank", "1",
            "--rankcutoff", "14", "--filesystems", "home:flare:daos_user"]  # fmt: skip
    assert main(["render", *args]) == 0
    spec = JobSpec(system="aurora", nodes=2, ranks_per_node=12, account="P", queue="debug-scaling",
                   tracer="unitrace", profrank=1, rankcutoff=14,
                   filesystems="home:flare:daos_user")  # fmt: skip
    script = capsys.readouterr().out
    assert script == spec.render()
    assert "#PBS -l filesystems=home:flare:daos_user" in script.splitlines()
    assert 'PROFRANK="${PROFRANK-1}"' in script and 'RANKCUTOFF="${RANKCUTOFF-14}"' in script


def test_submit_takes_the_same_spec_options():
    from hpcprof_kit.cli import build_parser
    from hpcprof_kit.cli.spec_args import _spec

    args = build_parser().parse_args(["submit", "--system", "polaris", "--nodes", "2",
                                      "--ranks-per-node", "4", "--tracer", "nsys", "--profrank",
                                      "2", "--rankcutoff", "7", "--filesystems", "home"])  # fmt: skip
    spec = _spec(args)
    assert (spec.profrank, spec.rankcutoff, spec.filesystems) == (2, 7, "home")


def test_render_into_a_missing_folder_is_one_clear_line(tmp_path):
    target = tmp_path / "missing" / "dir" / "x.sh"
    done = kit("render", "--system", "local", "-o", str(target))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (
        f"hpcprof-kit render: --output {target}: the folder {target.parent} does not exist; "
        f"create it first (mkdir -p {target.parent}) or write somewhere else\n"
    )
    assert not target.parent.exists()
