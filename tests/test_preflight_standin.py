"""``hpcprof-kit preflight`` against the site rehearsal's twin (a stand-in for an ALCF login node:
Lmod, PBS Pro's qstat/pbs_rstat): a missing module, a kit that does not import in a clean shell
and an unknown queue each give one FAIL line with the fix; the Nsight tools' lines give their
version (read from the real nsys too, where it is installed)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from hpcprof_kit.rehearsal import twin as twin_mod
from hpcprof_kit.systems import load_system


def _preflight(twin, *args: str) -> tuple[int, list[str]]:
    done = subprocess.run(
        [str(twin.kit_venv / "bin" / "python3"), "-m", "hpcprof_kit", "preflight", *args],
        env=twin.login_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    return done.returncode, done.stdout.splitlines()


def _line(lines: list[str], name: str) -> str:
    found = [ln for ln in lines if ln[5:].startswith(name)]
    assert len(found) == 1, lines
    return found[0]


@pytest.fixture
def aurora_without_pti_gpu(tmp_path):
    return twin_mod.build(tmp_path / "twin", load_system("aurora"), modules_missing=("pti-gpu",))


def test_preflight_on_the_standin_reports_a_missing_tracer_module(aurora_without_pti_gpu):
    code, lines = _preflight(aurora_without_pti_gpu, "--system", "aurora", "--account", "P")
    assert code == 1
    assert _line(lines, "modules").startswith(
        "OK   modules          module load frameworks/2025.3.1"
    )
    assert _line(lines, "kit").startswith("OK   kit              hpcprof_kit ")
    assert _line(lines, "venv module").startswith(
        "OK   venv module      built on frameworks/2025.3.1"
    )
    tracer = _line(lines, "tracer unitrace")
    assert tracer.startswith("FAIL tracer unitrace  unitrace not found after module pti-gpu: "
                             "Lmod has detected the following error:")  # fmt: skip
    assert tracer.endswith("-> fix: find its module with 'module spider unitrace' and update "
                           "modules in aurora.toml")  # fmt: skip
    assert _line(lines, "queue") == "OK   queue            queue debug is known to the scheduler"


def test_preflight_on_the_standin_reports_a_kit_that_does_not_import(aurora_without_pti_gpu):
    site = Path(aurora_without_pti_gpu.config["site_python"]).parent  # torch, no kit
    code, lines = _preflight(aurora_without_pti_gpu, "--system", "aurora", "--venv", str(site))
    assert code == 1
    kit = _line(lines, "kit")
    assert kit.startswith(f"FAIL kit              the kit does not import from {site} after the "
                          "site modules: ModuleNotFoundError: No module named 'hpcprof_kit'")  # fmt: skip
    assert "-> fix: on a login node: source env/aurora/setup.sh" in kit


def test_preflight_on_the_standin_reports_an_unknown_queue(tmp_path):
    twin = twin_mod.build(tmp_path / "twin", load_system("polaris"))
    code, lines = _preflight(twin, "--system", "polaris", "--queue", "debgu", "--account", "P")
    assert code == 1
    assert _line(lines, "queue") == (
        "FAIL queue            qstat -Qf debgu: qstat: Unknown queue debgu -> fix: use a queue "
        "of 'qstat -Q', or the reservation's queue of 'pbs_rstat'"
    )
    # Everything else is fine on this twin: nsys and ncu come with the default nvidia module,
    # and each line gives the version attendees' Nsight GUIs need (the stand-in's numbers).
    assert [ln[:4] for ln in lines if ln[5:].startswith(("modules", "kit", "tracer"))] == [
        "OK  "
    ] * 4
    assert _line(lines, "tracer nsys").endswith(
        "/nsys (from module nvidia), version 2024.5.1.113: attendees need Nsight Systems "
        "2024.5.1.113 or newer on their laptops to open its reports"
    )
    assert _line(lines, "tracer ncu").endswith(
        "/ncu (from module nvidia), version 2024.3.2.0: attendees need Nsight Compute 2024.3.2.0 "
        "or newer on their laptops to open its reports"
    )


def test_preflight_knows_a_reservation_queue(tmp_path):
    twin = twin_mod.build(tmp_path / "twin", load_system("aurora"),
                          reservations={"R4242": {"nodes": 8, "walltime": "03:00:00"}})  # fmt: skip
    _code, lines = _preflight(twin, "--system", "aurora", "--queue", "R4242")
    assert (
        _line(lines, "queue") == "OK   queue            reservation R4242 is known to the scheduler"
    )


def test_preflight_takes_the_queue_and_project_of_the_workshop_file(tmp_path):
    twin = twin_mod.build(tmp_path / "twin", load_system("aurora"),
                          reservations={"R4242": {"nodes": 8, "walltime": "03:00:00"}})  # fmt: skip
    ws = tmp_path / "workshop.toml"
    ws.write_text('[workshop]\nsystem = "aurora"\nproject = "CLASS"\nqueue = "R4242"\n')
    done = subprocess.run(
        [str(twin.kit_venv / "bin" / "python3"), "-m", "hpcprof_kit", "preflight", "--system",
         "aurora"], env={**twin.login_env(), "HPCPROF_WORKSHOP": str(ws)},
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    lines = done.stdout.splitlines()
    assert (
        _line(lines, "queue") == "OK   queue            reservation R4242 is known to the scheduler"
    )
    assert _line(lines, "account") == (
        "WARN account          sbank is not on PATH; CLASS not checked -> fix: run preflight on "
        "an ALCF login node"
    )


def test_preflight_reads_the_version_of_the_real_nsys():
    import shutil

    from hpcprof_kit.preflight import check_tracer

    from must_have import missing

    if not shutil.which("nsys", path="/usr/bin:/bin"):  # the clean login shell's PATH
        missing("nsys not found in /usr/bin: install Nsight Systems (.ci/run installs Debian's)")
    printed = subprocess.run(["/usr/bin/nsys", "--version"], capture_output=True, text=True)
    version = printed.stdout.split(" version ")[1].split("-")[0].strip()  # 2022.4.2.1-df9881f
    line = check_tracer(load_system("slurm"), "nsys").line()  # Slurm's record: no module
    assert line == (
        f"OK   tracer nsys      /usr/bin/nsys (from the default environment), version {version}: "
        f"attendees need Nsight Systems {version} or newer on their laptops to open its reports"
    )


@pytest.mark.parametrize(
    "printed",
    ["", "nsys: command wrapper\n", "NVIDIA Nsight Systems version unknown"],
)
def test_an_nsight_version_that_cannot_be_read_is_a_warning_with_the_fix(printed):
    from hpcprof_kit.preflight import _gui_rule

    check = _gui_rule("ncu", "/x/ncu (from module nvidia)", printed)
    assert check.line() == (
        "WARN tracer ncu       /x/ncu (from module nvidia); 'ncu --version' printed no version "
        "-> fix: run 'ncu --version' after the module and give attendees that version of Nsight "
        "Compute"
    )
