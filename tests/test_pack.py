"""The instructor's reference pack (issue #24): ``record-pack`` locally and under the
rehearsal's PBS twin for Aurora (a stand-in for PBS Pro, which cannot run here), and a
notebook's run falling back to it when the attendee's own job did not complete."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hpcprof_kit.cli import main
from hpcprof_kit.errors import SpecError
from hpcprof_kit.jobs import JobSpec, submit
from hpcprof_kit.pack import PACK_FILE, pack_run, record_pack, run_or_pack

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(900)]
SMALL = ("--steps", "2", "--warmup", "1", "--seq-len", "256", "--hidden", "64")  # a small run


@pytest.fixture(scope="module")
def local_pack(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pack")
    os.environ.setdefault("HPCPROF_WORKSHOP", "off")
    return record_pack(root / "pack", "local", backend="local", only=("seqpar",), app_args=SMALL)


def test_record_pack_runs_the_reference_sweep_and_says_what_each_run_is(local_pack):
    index = json.loads((local_pack / PACK_FILE).read_text())
    runs = index["sweeps"]["seqpar"]["runs"]
    assert [r["values"]["--dtype"] for r in runs] == ["float32", "bfloat16"]
    assert all(r["state"] == "COMPLETED" for r in runs)
    for r in runs:
        assert (
            json.loads((local_pack / r["run_dir"] / "job_end.json").read_text())["exit_code"] == 0
        )
    readme = (local_pack / "README.md").read_text()
    assert "## seqpar: sequence parallel timing" in readme and "bfloat16" in readme


def test_recording_again_runs_nothing_that_completed(local_pack, capsys):
    before = {p: p.stat().st_mtime_ns for p in local_pack.rglob("job_end.json")}
    assert main(["workshop", "record-pack", "--pack", str(local_pack), "--system", "local",
                 "--backend", "local", "--only", "seqpar"]) == 0  # fmt: skip
    assert "seqpar: --dtype=float32 nodes=1: COMPLETED" in capsys.readouterr().out
    assert {p: p.stat().st_mtime_ns for p in local_pack.rglob("job_end.json")} == before
    with pytest.raises(SpecError, match="holds a pack of local, not aurora"):
        record_pack(local_pack, "aurora", only=("seqpar",))
    with pytest.raises(SpecError, match="not reference sweeps"):
        record_pack(local_pack, "local", only=("nosuch",))


def test_a_notebook_falls_back_to_the_pack_when_the_attendees_job_did_not_complete(
    local_pack, isolated_runs, capsys
):
    """What notebook 05 does with ``run_or_pack(job)``: a cancelled job of the pack's spec."""
    spec = JobSpec(system="local", example="seqpar", args=(*SMALL, "--dtype", "bfloat16"))
    job = submit(spec, backend="local")
    assert job.cancel() == "CANCELLED"
    chosen = run_or_pack(job, local_pack)
    assert chosen == pack_run(spec.to_dict(), local_pack) and chosen.parent.parent == local_pack
    assert "reference run" in capsys.readouterr().out
    assert json.loads((chosen / "job_end.json").read_text())["exit_code"] == 0
    # another spec has no run in the pack: the attendee's own directory, and why
    other = submit(JobSpec(system="local", example="seqpar", args=(*SMALL, "--dtype", "float16")),
                   backend="local")  # fmt: skip
    other.cancel()
    assert run_or_pack(other, local_pack) == Path(other.run_dir)
    assert "has no completed run of this spec" in capsys.readouterr().out


def test_record_pack_under_the_pbs_twin_for_aurora(tmp_path, monkeypatch, isolated_runs):
    from hpcprof_kit.rehearsal import twin as twin_mod
    from hpcprof_kit.systems import load_system

    twin = twin_mod.build(tmp_path / "twin", load_system("aurora"), nodes=2)
    monkeypatch.setenv("PATH", f"{twin.bin}{os.pathsep}{os.environ['PATH']}")
    ws = tmp_path / "workshop.toml"
    ws.write_text(f'[workshop]\nsystem = "aurora"\nproject = "P"\nvenv = "{twin.kit_venv}"\n'
                  f'pack = "{tmp_path / "pack"}"\n')  # fmt: skip
    monkeypatch.setenv("HPCPROF_WORKSHOP", str(ws))
    record_pack(tmp_path / "pack", "aurora", only=("seqpar",), app_args=SMALL)
    index = json.loads((tmp_path / "pack" / PACK_FILE).read_text())
    runs = index["sweeps"]["seqpar"]["runs"]
    assert [(r["values"]["--dtype"], r["values"]["nodes"]) for r in runs] == [
        ("float32", 1), ("float32", 2), ("bfloat16", 1), ("bfloat16", 2),
    ]  # fmt: skip
    assert all(r["state"] == "COMPLETED" for r in runs), runs
    sweep_dir = tmp_path / "pack" / index["sweeps"]["seqpar"]["path"]
    script = next(sweep_dir.glob("array*.sh")).read_text()
    # ALCF's debug queue takes one job per user and PBS counts an array of N as N jobs
    assert "#PBS -J" not in script and "run one after another inside this single job" in script
