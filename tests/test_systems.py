"""System records are data: every record loads, and the facts the lessons rely on are there."""

import pytest

from hpcprof_kit.errors import SpecError, SystemError_
from hpcprof_kit.systems import detect_system, load_system, system_names


def test_every_record_loads_with_a_launcher_and_queues():
    assert {"aurora", "polaris", "slurm", "local"} <= set(system_names())
    for name in system_names():
        system = load_system(name)
        assert system.launcher in {"pals", "hydra", "srun"}, name
        assert system.scheduler in {"pbs", "slurm", "none"}, name
        assert system.queues, f"{name} has no queue"


def test_aurora_facts():
    aurora = load_system("aurora")
    topo = aurora.topology
    assert aurora.devices_per_node == 12  # FLAT: 6 GPUs x 2 tiles
    assert topo.logical_cpus == 208
    assert topo.reserved_cores == (0, 52)
    assert topo.socket_of_core(51) == 0 and topo.socket_of_core(52) == 1
    assert topo.socket_of_core(104) == 0 and topo.socket_of_core(156) == 1  # siblings
    assert [d.socket for d in topo.devices] == [0] * 6 + [1] * 6
    assert aurora.queue("debug").max_walltime == "01:00:00"
    assert aurora.hsn_suffix == ".hsn.cm.aurora.alcf.anl.gov"


def test_polaris_gpu_numa_is_reversed():
    polaris = load_system("polaris")
    assert [d.numa for d in polaris.topology.devices] == [3, 2, 1, 0]
    assert polaris.topology.numa_of_core(24) == 3
    assert polaris.topology.numa_of_core(56) == 3  # hyperthread sibling of core 24


def test_unknown_system_and_queue_name_the_choices():
    with pytest.raises(SystemError_, match="known: aurora, local, polaris, slurm"):
        load_system("frontier")
    with pytest.raises(SpecError) as info:
        load_system("aurora").queue("gpu")
    assert str(info.value) == (
        "queue 'gpu' is not a queue of aurora (known: 'debug', 'debug-scaling', 'prod', "
        "'capacity'); pick one of them or add it to aurora.toml; for a workshop reservation "
        "pass its queue name as pbs_rstat shows it (R<digits>, e.g. R123456), or run where "
        "qstat can confirm the queue"
    )


def test_a_slurm_site_gets_no_pbs_reservation_hint(tmp_path, monkeypatch):
    (tmp_path / "mysite.toml").write_text(
        'name = "mysite"\nscheduler = "slurm"\nlauncher = "srun"\n'
        "[topology]\nsockets = 1\ncores_per_socket = 8\nthreads_per_core = 1\n"
        "sibling_offset = 0\ngpus = 0\n"
        '[queues.batch]\nmin_nodes = 1\nmax_nodes = 4\nmax_walltime = "02:00:00"\n'
    )
    monkeypatch.setenv("HPCPROF_SYSTEMS_DIR", str(tmp_path))
    with pytest.raises(SpecError) as info:
        load_system("mysite").queue("R1")
    assert str(info.value) == (
        "queue 'R1' is not a queue of mysite (known: 'batch'); pick one of them or add it to "
        "mysite.toml"
    )


def test_a_new_site_is_a_new_data_file(tmp_path, monkeypatch):
    src = load_system("local").source
    assert src == "local.toml"
    text = (
        'name = "mysite"\nscheduler = "slurm"\nlauncher = "srun"\n'
        "[topology]\nsockets = 1\ncores_per_socket = 8\nthreads_per_core = 1\n"
        "sibling_offset = 0\ngpus = 0\n"
        '[queues.batch]\nmin_nodes = 1\nmax_nodes = 4\nmax_walltime = "02:00:00"\n'
    )
    (tmp_path / "mysite.toml").write_text(text)
    monkeypatch.setenv("HPCPROF_SYSTEMS_DIR", str(tmp_path))
    assert "mysite" in system_names()
    assert load_system("mysite").queue("batch").max_nodes == 4
    (tmp_path / "broken.toml").write_text('name = "broken"\n')
    with pytest.raises(SystemError_, match="lacks the field 'topology'"):
        load_system("broken")


@pytest.mark.parametrize(
    "env,expected",
    [
        ({"HPCPROF_SYSTEM": "polaris"}, "polaris"),
        ({"PBS_O_HOST": "aurora-uan-0010.hostmgmt.cm.aurora.alcf.anl.gov"}, "aurora"),
        ({"SLURM_JOB_ID": "42"}, "slurm"),
        ({}, "local"),
    ],
)
def test_detect_system(monkeypatch, env, expected):
    for var in ("HPCPROF_SYSTEM", "PBS_O_HOST", "PBS_SERVER", "SLURM_JOB_ID"):
        monkeypatch.delenv(var, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert detect_system() == expected
