"""A binding plan that masks a different device per rank is launched through its wrapper."""

import re
import subprocess

from hpcprof_kit.jobs import JobSpec


def test_polaris_helper_plan_gives_each_local_rank_its_reversed_gpu(tmp_path):
    spec = JobSpec(
        system="polaris", example="train", ranks_per_node=4, account="PROJ", binding="alcf-helper"
    )
    script = spec.render()
    assert script.rstrip().endswith(
        "mpiexec -n 4 -ppn 4 --depth=8 --cpu-bind depth -l --line-buffer --hostfile "
        '"$PBS_NODEFILE" \\\n    bash "$HPCPROF_RUN_DIR/bind.sh" python3 -m hpcprof_kit.apps.train'
    )
    body = re.search(r"<<'HPCPROF_BIND_EOF'\n(.*?)\nHPCPROF_BIND_EOF\n", script, re.S).group(1)
    wrapper = tmp_path / "bind.sh"
    wrapper.write_text(body + "\n")
    seen = []
    for local_rank in range(4):
        out = subprocess.run(
            ["bash", str(wrapper), "bash", "-c", "echo $CUDA_VISIBLE_DEVICES"],
            env={"PATH": "/usr/bin:/bin", "PALS_LOCAL_RANKID": str(local_rank)},
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        seen.append(out.stdout.strip())
    assert seen == ["3", "2", "1", "0"]  # GPU0 sits next to NUMA3: rank 0 takes GPU 3


def test_plans_that_use_set_device_need_no_wrapper():
    script = JobSpec(system="polaris", example="train", ranks_per_node=4, account="PROJ").render()
    assert "bind.sh" not in script
    assert "--cpu-bind list:24-31:16-23:8-15:0-7" in script
