"""``--backend`` naming another scheduler than the system's is refused before anything is
written: ``--backend pbs --system local`` once gave qsub a script with no ``#PBS`` lines that
wrote its files into ``$HOME``, and ``--system slurm`` sent ``#SBATCH`` and ``srun`` to qsub."""

from __future__ import annotations

import pytest

from hpcprof_kit.cli import main
from hpcprof_kit.errors import SpecError
from hpcprof_kit.jobs import JobSpec, submit

LOCAL_PBS = (
    "backend 'pbs' contradicts system 'local', whose scheduler is none: its script is written "
    "for this machine (no #PBS or #SBATCH lines, the files written where it starts), not for "
    "qsub; leave the backend at 'auto' (or pass 'local'), or pick a system whose scheduler is "
    "pbs (aurora, polaris)"
)
SLURM_PBS = (
    "backend 'pbs' contradicts system 'slurm', whose scheduler is slurm: its script is written "
    "for Slurm (#SBATCH lines, srun), not for qsub; leave the backend at 'auto' (or pass "
    "'local' or 'slurm'), or pick a system whose scheduler is pbs (aurora, polaris)"
)
AURORA_SLURM = (
    "backend 'slurm' contradicts system 'aurora', whose scheduler is pbs: its script is written "
    "for PBS (#PBS lines, the site's mpiexec), not for sbatch; leave the backend at 'auto' (or "
    "pass 'local' or 'pbs'), or pick a system whose scheduler is slurm (slurm)"
)


@pytest.mark.parametrize(
    ("words", "message"),
    [
        (["submit", "--system", "local", "--backend", "pbs"], LOCAL_PBS),
        (["submit", "--system", "slurm", "--backend", "pbs"], SLURM_PBS),
        (["submit", "--system", "aurora", "--account", "P", "--backend", "slurm"], AURORA_SLURM),
        (["sweep", "--system", "local", "--backend", "pbs", "--vary", "nodes=1"], LOCAL_PBS),
        (["sweep", "--system", "slurm", "--backend", "pbs", "--vary", "nodes=1"], SLURM_PBS),
        (["sweep", "--system", "slurm", "--backend", "pbs", "--vary", "nodes=1", "--dry-run"],
         SLURM_PBS),
    ],
)  # fmt: skip
def test_cli_refuses_a_backend_of_another_scheduler(isolated_runs, capsys, words, message):
    assert main(words) == 2
    err = capsys.readouterr().err
    assert err == f"hpcprof-kit {words[0]}: {message}\n"
    assert not isolated_runs.exists()  # no run or sweep directory was made


def test_python_submit_and_sweep_refuse_it_too(isolated_runs):
    with pytest.raises(SpecError, match="backend 'pbs' contradicts system 'slurm'"):
        submit(JobSpec(system="slurm"), backend="pbs")
    with pytest.raises(SpecError, match="backend 'slurm' contradicts system 'local'"):
        JobSpec(system="local", ranks_per_node=1).sweep(nodes=[1]).run(backend="slurm")
    assert not isolated_runs.exists()


def test_the_systems_own_scheduler_and_local_still_run(isolated_runs, capsys):
    # local is every system's "run the script right here"; the scheduler's own name is its own.
    words = ["submit", "--system", "local", "--backend", "local", "--ranks-per-node", "1",
             "--binding", "none", "--wait", "--", "true"]  # fmt: skip
    assert main(words) == 0
    assert "state: COMPLETED (exit code 0)" in capsys.readouterr().out
