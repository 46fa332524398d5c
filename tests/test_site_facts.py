"""Site facts corrected against ALCF's user guides (docs.alcf.anl.gov, whose source is the
argonne-lcf/user-guides repository): each fact pinned to its system record, and each record
citing the page it comes from."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpcprof_kit.jobs.catalog import catalog
from hpcprof_kit.systems import load_system
from hpcprof_kit.systems.modules import module_for, site_modules
from hpcprof_kit.tracers import wrapper_script

RECORDS = Path(__file__).resolve().parents[1] / "hpcprof_kit" / "systems"


def _text(system: str) -> str:
    return (RECORDS / f"{system}.toml").read_text()


@pytest.mark.parametrize(
    ("system", "page"),
    [
        ("aurora", "aurora/data-science/frameworks/pytorch.md"),  # frameworks/2025.3.1
        ("aurora", "aurora/running-jobs-aurora.md"),  # queues, 5-minute minimum, one job per user
        ("aurora", "aurora/data-science/profiling_dl.md"),  # mpiexec --pmi=pmix
        ("polaris", "polaris/system-updates.md"),  # conda/2025-09-25
        ("polaris", "polaris/applications-and-libraries/libraries/nccl.md"),  # plugin path
        ("polaris", "polaris/performance-tools/NVIDIA-Nsight.md"),  # nsys/ncu from nvidia
        ("polaris", "polaris/running-jobs/index.md"),  # queues
    ],
)
def test_each_record_cites_the_page_its_facts_come_from(system, page):
    comments = " ".join(ln.strip().lstrip("#").strip() for ln in _text(system).splitlines())
    assert f"docs: {page}" in comments


def test_site_modules_are_pinned_and_venvs_named_after_them():
    aurora, polaris = load_system("aurora"), load_system("polaris")
    assert aurora.setup_lines == ("module load frameworks/2025.3.1",)
    assert polaris.setup_lines == (
        "module use /soft/modulefiles", "module load conda/2025-09-25", "conda activate",
    )  # fmt: skip
    assert aurora.extra["default_venv"] == "$HOME/venvs/hpcprof-kit-aurora-frameworks-2025.3.1"
    assert polaris.extra["default_venv"] == "$HOME/venvs/hpcprof-kit-polaris-conda-2025-09-25"
    assert module_for(aurora, "unitrace").name == "pti-gpu"
    assert module_for(aurora, "xpu-smi").name == "xpu-smi"
    nvidia = module_for(polaris, "nsys")
    assert (nvidia.name, nvidia.default) == ("nvidia", True) and module_for(
        polaris, "ncu"
    ) == nvidia
    conda = next(m for m in site_modules(polaris) if "python" in m.provides)
    assert conda.use == "/soft/modulefiles"


def test_polaris_jobs_put_the_nccl_plugin_on_the_library_path():
    assert load_system("polaris").extra["prepend"]["LD_LIBRARY_PATH"] == [
        "/soft/libraries/aws-ofi-nccl/v1.9.1-aws/lib", "/soft/libraries/hwloc/lib",
    ]  # fmt: skip
    script = catalog()["polaris/train.sh"]
    line = ("export LD_LIBRARY_PATH=/soft/libraries/aws-ofi-nccl/v1.9.1-aws/lib:"
            "/soft/libraries/hwloc/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\n")  # fmt: skip
    assert line in script
    assert script.index(line) < script.index("export NCCL_NET='AWS Libfabric'")


def test_every_queue_has_a_five_minute_minimum_and_debug_takes_one_job_per_user():
    for system, one_per_user in (("aurora", ["debug", "debug-scaling"]),
                                 ("polaris", ["debug-scaling"])):  # fmt: skip
        rules = load_system(system).extra["queue_rules"]
        assert rules["min_walltime"] == "00:05:00"
        assert [q for q, r in rules.items() if isinstance(r, dict)] == one_per_user
        assert all(rules[q]["max_jobs_per_user"] == 1 for q in one_per_user)


def test_site_scripts_start_a_login_shell_and_aurora_launches_with_pmix():
    for path, text in catalog().items():
        if path.startswith(("aurora/", "polaris/")):
            assert text.startswith("#!/bin/bash -l\n"), path
    assert load_system("aurora").extra["launcher_args"] == ["--pmi=pmix"]
    assert "mpiexec -n 12 -ppn 12 --pmi=pmix --cpu-bind list:" in catalog()["aurora/train.sh"]
    assert "--pmi" not in catalog()["polaris/train.sh"]


def test_unitrace_records_the_itt_ranges_the_kit_emits():
    text = wrapper_script("unitrace", "aurora")
    assert "--chrome-itt-logging" in text and "export HPCPROF_EMIT_ITT=1" in text


def test_depth_8_on_aurora_follows_pals_documented_placement():
    from hpcprof_kit.affinity import plan_for
    from hpcprof_kit.affinity.cpulist import format_cpus

    cpus = [format_cpus(r.cpus) for r in plan_for("aurora", 12, "depth-8").ranks]
    assert cpus[0] == "1-8" and cpus[6] == "49-51,53-57" and cpus[11] == "90-97"


def test_a_walltime_under_the_sites_minimum_is_refused_before_qsub_sees_it():
    from hpcprof_kit.errors import SpecError
    from hpcprof_kit.jobs import JobSpec

    with pytest.raises(SpecError) as info:
        JobSpec(system="aurora", account="P", walltime="00:04:59").validate()
    assert str(info.value) == (
        "walltime 00:04:59 is below aurora's minimum 00:05:00 for every queue (aurora.toml); "
        "ask for at least 00:05:00"
    )
    JobSpec(system="aurora", account="P", walltime="00:05:00").validate()
