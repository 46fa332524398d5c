"""The real intel-extension-for-pytorch beside the kit (IPEX 2.8.0's CPU build, torch 2.8).

Only CI's site-torch leg (env/site_torch/run_leg.sh) has it; it sets HPCPROF_REQUIRE_IPEX=1, so
there a missing or broken IPEX fails these tests instead of skipping them. Each use of IPEX runs
in its own process: importing it registers kernels for the whole process, and the stand-in IPEX
of tests/test_device.py (for what needs an XPU) must not meet the real one.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hpcprof_kit.porting import port_file

from must_have import REQUIRE_IPEX_VAR, missing

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "cuda_train_alcf_style.py"


def _python(code: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, cwd=REPO
    )


@pytest.fixture(scope="module")
def ipex_version() -> str:
    done = _python(
        "from hpcprof_kit.device import _import_ipex\n"
        "ipex, reason = _import_ipex()\n"
        "print(ipex.__version__ if ipex else 'MISSING ' + reason)\n"
    )
    last = (done.stdout.strip().splitlines() or [f"MISSING {done.stderr[-300:]}"])[-1]
    if last.startswith("MISSING"):
        missing(f"intel-extension-for-pytorch does not import here: {last[8:]}", REQUIRE_IPEX_VAR)
    return last


def test_ipex_imports_beside_the_kit_and_the_profiler(ipex_version, tmp_path):
    done = _python(
        "import json, torch, hpcprof_kit\n"
        "from torch.profiler import ProfilerActivity, profile\n"
        "from hpcprof_kit.profiling import record_function\n"
        "import intel_extension_for_pytorch as ipex\n"
        "with profile(activities=[ProfilerActivity.CPU]) as prof:\n"
        "    with record_function('matmul'):\n"
        "        torch.ones(64, 64) @ torch.ones(64, 64)\n"
        f"prof.export_chrome_trace({str(tmp_path / 'trace-0-of-1.json')!r})\n"
        "print(json.dumps({'torch': torch.__version__, 'ipex': ipex.__version__}))\n"
    )
    assert done.returncode == 0, done.stderr
    versions = json.loads(done.stdout.splitlines()[-1])
    assert versions["ipex"] == ipex_version
    # IPEX pins its torch release: 2.8.x with 2.8.x
    assert versions["torch"].split(".")[:2] == versions["ipex"].split(".")[:2]
    from hpcprof_kit.traces import load

    assert "matmul" in set(load(tmp_path / "trace-0-of-1.json")["name"])


def test_ipex_optimize_on_the_ported_atpesc_example_model_and_optimizer(ipex_version):
    code = port_file(EXAMPLE, "xpu", ipex=True).code.splitlines()
    # the ported lines, from the model to ipex.optimize, run on the CPU (no XPU here)
    start = next(i for i, ln in enumerate(code) if ln.startswith("model = torch.nn.Transformer("))
    end = code.index("model, optimizer = ipex.optimize(model, optimizer=optimizer)")
    imports = [ln for ln in code[:start] if ln.startswith(("import ", "from "))]
    body = [ln.replace('.to("xpu")', '.to("cpu")') for ln in code[start : end + 1]]
    assert body[0].endswith('.to("cpu")') and len(body) == 3, body
    done = _python(
        "\n".join(
            [
                *imports,
                "SIZE = 1",
                "import torch",
                "plain = None",
                *body[:2],
                "plain, plain_opt = model, optimizer",
                body[2],
            ]
        )  # fmt: skip
        + "\nsrc, tgt = torch.rand(2, 10, 512), torch.rand(2, 20, 512)\n"
        "loss = torch.nn.MSELoss()(model(src, tgt), tgt)\n"
        "loss.backward(); optimizer.step()\n"
        "from hpcprof_kit.device import optimize\n"
        "_, _, note = optimize(plain, plain_opt, 'cpu', on_cpu=True)\n"
        "print(optimizer.step.__module__, model is plain, bool(loss.item() > 0))\n"
        "print(note)\n",
    )
    assert done.returncode == 0, done.stderr[-3000:]
    step_module, same, finite = done.stdout.splitlines()[-2].split()
    # IPEX's own fused step on a copy of the model; the step ran
    assert step_module.startswith("intel_extension_for_pytorch") and same == "False"
    assert finite == "True"
    assert done.stdout.splitlines()[-1] == (
        f"intel-extension-for-pytorch {ipex_version}: ipex.optimize applied on cpu (a copy of the "
        "model; 0 of 211 modules replaced; the optimizer's step is IPEX's adam_step)"
    )


@pytest.mark.mpi
def test_profiled_two_rank_train_with_ipex_through_a_local_job(ipex_version, mpiexec):
    from hpcprof_kit.jobs import JobSpec, submit
    from hpcprof_kit.traces import load

    args = ("--ipex", "--epochs", "1", "--steps-per-epoch", "4", "--prof-wait", "1",
            "--prof-warmup", "1", "--prof-active", "2")  # fmt: skip
    spec = JobSpec(system="local", example="train", ranks_per_node=2, binding="none",
                   profile=True, args=args, walltime="00:10:00")  # fmt: skip
    job = submit(spec)
    state = job.wait(timeout=300, progress=False)
    assert state == "COMPLETED", job.tail(40, "stderr")
    stdout = (job.run_dir / "stdout").read_text()
    assert (
        f"optimize: intel-extension-for-pytorch {ipex_version}: ipex.optimize applied on cpu"
        in stdout
    )
    assert "the optimizer's step is IPEX's adam_step" in stdout
    table = load(job.run_dir)
    assert sorted(table["rank"].unique()) == [0, 1]
    names = set(table["name"])
    assert {"forward", "optimizer"} <= names, sorted(names)[:40]
