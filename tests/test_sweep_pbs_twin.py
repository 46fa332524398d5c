"""An Aurora sweep as one PBS Pro job array under the rehearsal's PBS twin (issue #24; a real
PBS Pro cannot be installed here): ``#PBS -J``, one subjob per variant picked by
``PBS_ARRAY_INDEX``, each writing its own run directory, as the twin runs arrays the way a
real OpenPBS server ran them (../shared/reference/openpbs/README.md)."""

from __future__ import annotations

import json
import os
import warnings

import pytest

from hpcprof_kit.jobs import JobSpec
from hpcprof_kit.rehearsal import twin as twin_mod
from hpcprof_kit.systems import load_system

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(600)]


def test_an_aurora_sweep_runs_as_one_pbs_array_under_the_twin(tmp_path, monkeypatch, isolated_runs):
    twin = twin_mod.build(tmp_path / "twin", load_system("aurora"),
                          reservations={"R1": {"nodes": 1, "walltime": "01:00:00"}})  # fmt: skip
    monkeypatch.setenv("PATH", f"{twin.bin}{os.pathsep}{os.environ['PATH']}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # R1 is a reservation the kit's record does not list
        base = JobSpec(system="aurora", example="affinity", queue="R1", account="P",
                       venv=str(twin.kit_venv))  # fmt: skip
        sweep = base.sweep(ranks_per_node=[1, 2])
        sweep.run(backend="pbs", wait=True)
    record = json.loads((sweep.path / "sweep.json").read_text())
    states = [v["state"] for v in record["variants"]]
    assert states == ["COMPLETED", "COMPLETED"], record
    script = next(sweep.path.glob("array*.sh")).read_text()
    assert "#PBS -J 0-1\n" in script and 'case "${PBS_ARRAY_INDEX:?' in script
    ids = [v["job_id"] for v in record["variants"]]
    parent = ids[0].replace("[0]", "[]")
    assert ids == [parent.replace("[]", "[0]"), parent.replace("[]", "[1]")]
    for v, ranks in zip(record["variants"], (1, 2), strict=True):
        run = sweep.path / v["run_dir"]
        assert json.loads((run / "job_end.json").read_text())["exit_code"] == 0
        spec = json.loads((run / "spec.json").read_text())
        assert spec["ranks_per_node"] == ranks
    # the twin ran each subjob with its own index
    events = [json.loads(line) for line in twin.log_path.read_text().splitlines()]
    started = [e["job_id"] for e in events if e["event"] == "job_start"]
    assert started == ids
