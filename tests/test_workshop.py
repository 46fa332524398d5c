"""The workshop file: written by ``hpcprof-kit workshop init``, read by the notebooks' parameter
cells and by JobSpec, and carried through a rehearsed Aurora and Polaris job (stand-ins)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hpcprof_kit import workshop
from hpcprof_kit.cli import main
from hpcprof_kit.errors import SpecError
from hpcprof_kit.jobs import JobSpec

REPO = Path(__file__).resolve().parents[1]
PROXY = "http://proxy.alcf.anl.gov:3128"


def _init(tmp_path, monkeypatch, *args: str) -> Path:
    path = tmp_path / "workshop.toml"
    assert main(["workshop", "init", "-o", str(path), *args]) == 0
    monkeypatch.setenv("HPCPROF_WORKSHOP", str(path))
    return path


def _parameters(notebook: str) -> dict:
    nb = json.loads((REPO / "notebooks" / f"{notebook}.ipynb").read_text())
    cell = next(c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", []))
    namespace: dict = {}
    exec("".join(cell["source"]), namespace)  # the cell as the kernel runs it
    return namespace


def test_init_writes_a_file_the_notebooks_parameter_cells_read(tmp_path, monkeypatch, capsys):
    path = _init(tmp_path, monkeypatch, "--system", "aurora", "--project", "MYPROJ",
                 "--queue", "R123456", "--reservation-nodes", "8",
                 "--reservation-walltime", "03:00:00")  # fmt: skip
    assert path.read_text().splitlines()[2:] == [
        "[workshop]", 'system = "aurora"', 'project = "MYPROJ"', 'queue = "R123456"',
        "reservation_nodes = 8", 'reservation_walltime = "03:00:00"',
        'filesystems = "home:flare"', "ranks_per_node = 12", "[workshop.proxy]",
        f'http_proxy = "{PROXY}"', f'https_proxy = "{PROXY}"',
    ]  # fmt: skip
    for notebook in ("00_quickstart", "03_ddp_with_mpi", "04_profiler_schedules",
                     "05_reading_traces", "07_affinity_exercise", "08_sequence_parallel_timing",
                     "09_capstone_diagnosis"):  # fmt: skip
        params = _parameters(notebook)
        assert params["system"] == "aurora", notebook
        assert params.get("ranks", params.get("ranks_per_node", 12)) == 12, notebook
    assert _parameters("01_device_discovery")["system"] == "aurora"


def test_without_a_file_the_parameter_cells_keep_the_laptop_defaults(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HPCPROF_WORKSHOP")
    assert _parameters("00_quickstart")["system"] == "local"
    assert _parameters("00_quickstart")["ranks"] == 2


def test_for_workshop_takes_the_workshops_settings_for_its_system_only(tmp_path, monkeypatch):
    _init(tmp_path, monkeypatch, "--system", "aurora", "--project", "MYPROJ", "--queue",
          "R123456", "--reservation-nodes", "2", "--reservation-walltime", "02:00:00")  # fmt: skip
    spec = JobSpec.for_workshop(system="aurora")
    assert (spec.account, spec.queue, spec.filesystems) == ("MYPROJ", "R123456", "home:flare")
    assert spec.reservation == {"nodes": 2, "walltime": "02:00:00"}
    assert spec.env == {"http_proxy": PROXY, "https_proxy": PROXY}
    text = spec.render()  # the reservation's limits carried by the spec: no warning
    assert "#PBS -A MYPROJ\n#PBS -q R123456\n" in text
    assert f"export https_proxy={PROXY}\n" in text
    mine = JobSpec.for_workshop(system="aurora", account="OTHER", env={"http_proxy": "x"})
    assert (mine.account, mine.env["http_proxy"]) == ("OTHER", "x")
    assert JobSpec.for_workshop(system="polaris").account is None
    assert JobSpec.for_workshop().system == "aurora"  # the workshop's system by default
    with pytest.raises(SpecError, match="nodes 3 is outside"):
        JobSpec.for_workshop(system="aurora", nodes=3).validate()
    # Its own queue only: another queue is looked up, not given the reservation's limits.
    assert JobSpec.for_workshop(system="aurora", queue="debug").reservation is None


def test_a_jobspec_is_the_same_value_inside_and_outside_a_workshop_folder(tmp_path, monkeypatch):
    fields = {"system": "polaris", "example": "train", "nodes": 2, "ranks_per_node": 4}
    outside = JobSpec(**fields)
    monkeypatch.delenv("HPCPROF_WORKSHOP")  # the file is found from the current folder
    folder = tmp_path / "class"
    folder.mkdir()
    workshop.init(
        folder / "workshop.toml",
        workshop.Workshop(
            system="polaris", project="P", queue="R9", reservation_nodes=2, filesystems="home:eagle"
        ),
    )
    monkeypatch.chdir(folder)
    assert workshop.current().source.endswith("workshop.toml")  # the file is in effect here
    inside = JobSpec(**fields)
    assert inside == outside
    assert inside.to_json() == outside.to_json()
    assert (inside.account, inside.queue, inside.reservation) == (None, None, None)
    # Asking for the workshop's values is the one explicit step.
    chosen = JobSpec.for_workshop(**fields)
    assert (chosen.account, chosen.queue, chosen.filesystems) == ("P", "R9", "home:eagle")
    assert chosen == outside.with_(account="P", queue="R9", filesystems="home:eagle",
                                   reservation={"nodes": 2})  # fmt: skip


def test_bad_workshop_files_name_the_key_and_the_file(tmp_path, monkeypatch):
    path = tmp_path / "workshop.toml"
    monkeypatch.setenv("HPCPROF_WORKSHOP", str(path))
    path.write_text('[workshop]\nsystem = "aurora"\nprojetc = "X"\n')
    with pytest.raises(SpecError, match=r"unknown keys \['projetc'\]"):
        workshop.current()
    path.write_text('[workshop]\nsystem = "aurora"\nreservation_walltime = "3h"\n')
    with pytest.raises(
        SpecError, match=r"reservation_walltime '3h' in .*workshop.toml is not HH:MM:SS"
    ):
        workshop.current()
    with pytest.raises(SpecError, match="exists; edit it, or pass --force"):
        workshop.init(path, workshop.Workshop(system="aurora"))
    monkeypatch.setenv("HPCPROF_WORKSHOP", str(tmp_path / "missing.toml"))
    with pytest.raises(SpecError, match="names no file"):
        workshop.current()


@pytest.mark.mpi
@pytest.mark.timeout(300)
@pytest.mark.parametrize(("system", "nodes"), [("aurora", 2), ("polaris", 2)])
def test_rehearsal_runs_the_workshop_reservation_and_proxy_standin(
    tmp_path, monkeypatch, isolated_runs, system, nodes
):
    from hpcprof_kit.rehearsal import rehearse

    _init(tmp_path, monkeypatch, "--system", system, "--project", "CLASS", "--queue", "R777",
          "--reservation-nodes", str(nodes), "--reservation-walltime", "02:00:00")  # fmt: skip
    # One write per line (os.write): ranks share stdout, and a print of several pieces may be split.
    show = ("import os; os.write(1, ' '.join(['PROXY', os.environ['https_proxy'], "
            "os.environ['PALS_RANKID']]).encode() + b'\\n')")  # fmt: skip
    spec = JobSpec.for_workshop(system=system, nodes=nodes, ranks_per_node=2, binding="none",
                                command=["python3", "-c", show])  # fmt: skip
    result = rehearse(spec, runs_root=isolated_runs)
    assert result.ok, result.text()
    assert f"queue R777, {nodes} node(s)" in result.stage("start").detail
    stdout = (Path(result.run_dir) / "stdout").read_text()
    assert sorted(ln.split("PROXY ")[1] for ln in stdout.splitlines() if "PROXY" in ln) == [
        f"{PROXY} {r}" for r in range(nodes * 2)
    ]
