"""Notebook 03's check of the learner's DDP job (``nb03.check_my_rendezvous``) reads the job's
stdout as each launcher prints it: unlabelled (the kit's local launch), Hydra ``-l``'s
``[0] ``, PALS ``mpiexec --label``'s and ``srun --label``'s ``0: ``, ranks interleaved, or two
ranks' lines joined on one. A right job passes under every form; a wrong one (a rank that
never printed, a backend that does not fit the device) fails, and the hint says what the
check saw. The banner is the kit's own (``RankInfo.banner``), written as each launcher prints
it."""

from __future__ import annotations

import json

import pytest

from hpcprof_kit.exercises.nb03 import check_my_rendezvous

SCRIPT = (
    "from mpi4py import MPI\nimport torch.distributed as dist\n"
    "from torch.nn.parallel import DistributedDataParallel\n"
    "addr = MPI.COMM_WORLD.bcast('h', root=0)\ndist.init_process_group()\n"
    "model = DistributedDataParallel(torch_model)\ndist.destroy_process_group()\n"
)


def banner(rank: int, backend: str = "gloo") -> str:
    return (f"rank={rank} local_rank={rank} world=2 nodes=1 device=cpu backend={backend} "
            "host=vm")  # fmt: skip


RIGHT = {
    "local, unlabelled": f"{banner(0)}\n{banner(1)}\n",
    "hydra -l": f"[0] {banner(0)}\n[1] {banner(1)}\n",
    "pals --label": f"0: {banner(0)}\n1: {banner(1)}\n",
    "srun --label": f"1: {banner(1)}\n0: {banner(0)}\n",
    "interleaved with other output": f"0: loss 1.2\n1: {banner(1)}\n0: {banner(0)}\n1: done\n",
    "two ranks on one line": f"{banner(0)}{banner(1)}\n",
    "two labelled ranks on one line": f"0: {banner(0)}1: {banner(1)}\n",
}
WRONG = {
    "rank 1 never printed (hydra -l)": (f"[0] {banner(0)}\n", "ranks [0] of 2"),
    "rank 1 never printed (pals --label)": (f"0: {banner(0)}\n", "ranks [0] of 2"),
    "nccl on a CPU (srun --label)": (f"0: {banner(0, 'nccl')}\n1: {banner(1, 'nccl')}\n",
                                     "printed backend=nccl"),
}  # fmt: skip


def _job(tmp_path, stdout: str):
    script = tmp_path / "my_ddp.py"
    script.write_text(SCRIPT)
    run = tmp_path / "run"
    run.mkdir()
    (run / "spec.json").write_text(json.dumps({"nodes": 1, "ranks_per_node": 2}))
    (run / "stdout").write_text(stdout)
    return script, run


@pytest.mark.parametrize("form", list(RIGHT))
def test_a_right_job_passes_as_each_launcher_prints_it(form, tmp_path, capsys):
    script, run = _job(tmp_path, RIGHT[form])
    assert check_my_rendezvous(script, run) is True
    assert "Correct - 2 ranks met" in capsys.readouterr().out


@pytest.mark.parametrize("case", list(WRONG))
def test_a_wrong_job_fails_and_says_what_it_saw(case, tmp_path, capsys):
    stdout, said = WRONG[case]
    script, run = _job(tmp_path, stdout)
    assert check_my_rendezvous(script, run) is False
    assert said in capsys.readouterr().out
