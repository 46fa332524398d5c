"""A new site is one data file: a record written to ``$HPCPROF_SYSTEMS_DIR`` alone (no code
change) is listed by the CLI, gets its ready scripts (shellcheck-clean), its binding presets,
its launcher flags and node names, and its jobs rehearse to COMPLETED on the PBS stand-in (a
PBS Pro server, Lmod and Cray PALS cannot run here)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from hpcprof_kit.affinity import load_presets, plan_for
from hpcprof_kit.cli import main
from hpcprof_kit.jobs import JobSpec
from hpcprof_kit.jobs.catalog import catalog_specs
from hpcprof_kit.rehearsal import rehearse
from hpcprof_kit.systems import load_system, system_names

# A made-up PBS site: one socket of 16 cores, 2 GPUs, PALS, its own module, queue and plans.
RECORD = """\
name = "lakeside"
title = "Lakeside (2 NVIDIA GPUs, PBS Pro, Cray PALS)"
scheduler = "pbs"
launcher = "pals"
launcher_args = ["--no-transfer"]
device_type = "cuda"
backend = "nccl"
profiler_activity = "CUDA"
hsn_suffix = ""
node_names = "lk{}"
account_required = true
default_queue = "short"
default_filesystems = "home"
default_binding = "halves"
vendor_tracers = ["nsys"]
pbs_place = "scatter"
default_venv = "$HOME/venvs/hpcprof-kit-lakeside"

[topology]
sockets = 1
cores_per_socket = 16
threads_per_core = 1
sibling_offset = 0
reserved_cores = []
reserved_note = ""
gpus = 2
tiles_per_gpu = 1
device_hierarchy = ""
device_mask_var = "CUDA_VISIBLE_DEVICES"
memory_per_device_gib = 16
[[topology.numa]]
id = 0
socket = 0
kind = "ddr"
cores = "0-7"
[[topology.numa]]
id = 1
socket = 0
kind = "ddr"
cores = "8-15"
[[topology.devices]]
id = 0
gpu = 0
tile = 0
socket = 0
numa = 0
[[topology.devices]]
id = 1
gpu = 1
tile = 0
socket = 0
numa = 1

[queues.short]
min_nodes = 1
max_nodes = 2
max_walltime = "00:30:00"

[environment]
setup = ["module load lakeside-torch/2025"]

[[modules]]
name = "lakeside-torch/2025"
provides = ["python"]
[[modules]]
name = "nvhpc"
provides = ["nsys"]
default = true

[ready_scripts.train-short]
example = "train"
walltime = "00:05:00"

[bindings.halves]
title = "rank i on the NUMA domain next to GPU i"
origin = "this site's node layout"
device = "local_rank"
known_problems = []
[[bindings.halves.lists]]
ranks = 2
cpu_bind = "list:0-7:8-15"

[bindings.none]
title = "no binding"
origin = "the launcher's --cpu-bind none"
device = "local_rank"
known_problems = ["unbound"]
ranks = [2]
cpu_bind = "none"
"""


@pytest.fixture
def lakeside(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "records"
    folder.mkdir()
    (folder / "lakeside.toml").write_text(RECORD)
    monkeypatch.setenv("HPCPROF_SYSTEMS_DIR", str(folder))
    return folder


def test_the_record_alone_makes_a_site_the_cli_and_the_presets_know(lakeside, capsys):
    assert "lakeside" in system_names()
    with pytest.raises(SystemExit):
        main(["submit", "--help"])
    assert "lakeside" in capsys.readouterr().out
    assert list(load_presets("lakeside")) == ["halves", "none"]
    plan = plan_for("lakeside", 2)  # the record's default binding
    assert plan.cpu_bind == "--cpu-bind list:0-7:8-15"
    assert main(["bind", "presets", "--system", "lakeside", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["name"] for row in rows] == ["halves", "none", "auto"]  # auto: generated


def test_the_new_sites_ready_scripts_render_with_its_flags_and_are_shellcheck_clean(
    lakeside, tmp_path
):
    ours = {k: s for k, s in catalog_specs().items() if k.startswith("lakeside/")}
    assert sorted(ours) == [
        "lakeside/affinity.sh", "lakeside/seqpar.sh", "lakeside/train-compile-profile.sh",
        "lakeside/train-compile.sh", "lakeside/train-nsys.sh", "lakeside/train-profile.sh",
        "lakeside/train-short.sh", "lakeside/train.sh",
    ]  # fmt: skip
    assert ours["lakeside/train-short.sh"].walltime == "00:05:00"
    out = tmp_path / "jobs"
    assert main(["render", "--all", str(out)]) == 0
    text = (out / "lakeside" / "train.sh").read_text()
    assert "#PBS -q short\n" in text and "#PBS -A YOUR_PROJECT\n" in text
    assert "module load lakeside-torch/2025\n" in text
    launch = next(ln for ln in text.splitlines() if ln.lstrip().startswith("mpiexec"))
    assert launch.split()[:5] == ["mpiexec", "-n", "2", "-ppn", "2"]
    assert "--no-transfer --cpu-bind list:0-7:8-15" in launch  # the site's flag, then the plan's
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        from must_have import missing

        missing("shellcheck is not on PATH (Debian's shellcheck)")
    for script in sorted((out / "lakeside").glob("*.sh")):
        done = subprocess.run([shellcheck, "-s", "bash", str(script)], capture_output=True,
                              text=True)  # fmt: skip
        assert done.returncode == 0, f"{script.name}: {done.stdout}"


@pytest.mark.mpi
@pytest.mark.timeout(600)
def test_the_new_sites_jobs_rehearse_on_the_pbs_standin(lakeside, isolated_runs):
    # One write per line (os.write): ranks share stdout, and a print of several pieces may be split.
    show = (
        "import os; os.write(1, ' '.join(['NODE', os.environ['PALS_RANKID'], "
        "*open(os.environ['PBS_NODEFILE']).read().split()]).encode() + b'\\n')"
    )
    spec = JobSpec(system="lakeside", nodes=2, ranks_per_node=2, account="P", binding="none",
                   command=["python3", "-c", show])  # fmt: skip
    result = rehearse(spec, runs_root=isolated_runs)
    assert result.ok, result.text()
    assert "queue short, 2 node(s)" in result.stage("start").detail
    stdout = (Path(result.run_dir) / "stdout").read_text()
    ranks = sorted(ln.split("NODE ")[1].split()[0] for ln in stdout.splitlines() if "NODE " in ln)
    assert ranks == ["0", "1", "2", "3"]
    hosts = {tuple(ln.split("NODE ")[1].split()[1:]) for ln in stdout.splitlines() if "NODE " in ln}
    assert hosts == {("lk0", "lk1")}  # the node file names the nodes as the record says
    # The ready script of the site's own variant completes too.
    ready = catalog_specs()["lakeside/train-short.sh"].with_(
        ranks_per_node=1, args=("--epochs", "1", "--steps-per-epoch", "2")
    )
    assert rehearse(ready, runs_root=isolated_runs).ok
    assert load_system("lakeside").source == "lakeside.toml"
