"""The site rehearsal (a stand-in for PBS Pro, Lmod and Cray PALS, which cannot run here): the
ready Aurora and Polaris scripts that between them ask for every feature (``scripts_to_rehearse``)
run to COMPLETED at their own rank count as the site would start them, and scripts that would
fail on the site fail at the stage where the site would fail."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hpcprof_kit.jobs import JobSpec
from hpcprof_kit.jobs.catalog import catalog_specs
from hpcprof_kit.rehearsal import PREFIX, rehearse
from hpcprof_kit.rehearsal.pals import LaunchRefused, parse_args
from hpcprof_kit.tracer_ranks import traced_ranks

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).parent / "fixtures" / "rehearsal"


# What a site's own parts decide (its scheduler, modules and launcher, its tracers and how they
# pick ranks and steps, its CPU binding) is rehearsed at every site; what the app does with its
# flags (its example, compile, the profiler) is the same Python at every site, rehearsed once.
APP_FEATURES = ("example:train", "example:seqpar", "compile", "profile")


def _features(spec: JobSpec) -> set[str]:
    """What a ready script asks of the site: its example, the profiler, compile, its tracer, the
    tracer's rank rule (every rank or the seeds' selection) and a capture range; the site's own
    features named with the site, and the site itself (each is rehearsed at least once)."""
    found = {f"example:{spec.example}"}
    found |= {"profile"} if spec.profile else set()
    found |= {"compile"} if "--compile" in spec.args else set()
    if spec.tracer:
        found |= {f"tracer:{spec.tracer}", "ranks:all" if spec.trace_all else "ranks:rule"}
    found |= {"capture"} if spec.capture_steps else set()
    return {f if f in APP_FEATURES else f"{spec.system}:{f}" for f in found} | {spec.system}


def scripts_to_rehearse(sites: tuple[str, ...] = ("aurora", "polaris")) -> list[str]:
    """The ready scripts of ``sites`` that together ask for every feature any of them asks for,
    for the fewest ranks started (greedy: most features not yet covered per rank, ties by name).
    The others differ from these only in text, which test_jobs_render.py holds to the catalog
    and the goldens; an app feature runs where the site has the fewest ranks (Polaris's 4)."""
    specs = {k: s for k, s in catalog_specs().items() if k.split("/")[0] in sites}
    features = {k: _features(s) for k, s in specs.items()}
    left, chosen = set().union(*features.values()), []
    while left:
        best = max(sorted(features), key=lambda k: len(features[k] & left) / specs[k].total_ranks)
        chosen.append(best)
        left -= features[best]
    return sorted(chosen)


SITE_SCRIPTS = scripts_to_rehearse()
_REHEARSED: dict[str, object] = {}  # a ready script's rehearsal, shared by the tests that read it


def rehearsed(path: str, runs_root: Path):
    """The rehearsal of the ready script ``jobs/<path>``, run once per module (read-only after)."""
    if path not in _REHEARSED:
        spec = catalog_specs()[path]
        _REHEARSED[path] = rehearse(spec, script=REPO / "jobs" / path, runs_root=runs_root)
    return _REHEARSED[path]


pytestmark = [pytest.mark.mpi, pytest.mark.timeout(600)]


def _stages(result) -> dict[str, str]:
    return {s.name: s.status for s in result.stages}


@pytest.mark.parametrize("path", SITE_SCRIPTS)
def test_ready_site_script_completes_under_the_rehearsal_standin(path, isolated_runs):
    spec = catalog_specs()[path]
    result = rehearsed(path, isolated_runs)
    assert result.ok, result.text()
    run = Path(result.run_dir)
    assert (run / "job.sh").read_text() == (REPO / "jobs" / path).read_text()
    # The rank count is the site's: a full node (12 tiles on Aurora, 4 GPUs on Polaris).
    assert re.search(rf"mpiexec -n {spec.total_ranks} \(1 node\(s\) x {spec.ranks_per_node}\)",
                     result.stage("launch").detail)  # fmt: skip
    assert spec.total_ranks == {"aurora": 12, "polaris": 4}[spec.system]
    assert f"{spec.total_ranks} ranks ran and exited 0" in result.stage("ranks").detail
    if spec.tracer:  # tracer output for exactly the ranks the seeds' rule (or trace_all) selects
        expect = traced_ranks(spec.total_ranks, spec.ranks_per_node, spec.profrank,
                              spec.rankcutoff, all_ranks=spec.trace_all)  # fmt: skip
        ranks = ", ".join(map(str, expect))
        assert f"{spec.tracer} stand-in output for ranks {ranks}" in result.stage("outputs").detail
        if spec.capture_steps:
            assert (
                f"each captured only steps {spec.capture_steps}" in result.stage("outputs").detail
            )
    if spec.profile:
        traces = sorted(p.name for p in (run / "traces").glob("*-of-*.json"))
        assert len(traces) == spec.total_ranks
        shown = ", ".join(map(str, range(min(spec.total_ranks, 6))))
        more = " ..." if spec.total_ranks > 6 else ""
        assert result.stage("traces").detail.endswith(f"ranks {shown}{more}")
    if spec.example == "affinity":
        assert result.stage("affinity").status == "ok"
    # Every line of the report says it is a stand-in; the run directory keeps the report.
    assert all(line.startswith(PREFIX) for line in result.text().splitlines())
    assert (run / "rehearsal.json").exists() and (run / "rehearsal_log.jsonl").exists()


def test_todays_aurora_script_fails_at_ranks_with_the_missing_module_message(isolated_runs):
    # The script the kit rendered before it activated its environment (kept as a fixture).
    script = FIXTURES / "aurora_train_unversioned_env.sh"
    result = rehearse(catalog_specs()["aurora/train.sh"], script=script, runs_root=isolated_runs)
    assert result.failed_stage == "ranks", result.text()
    assert _stages(result)["modules"] == "ok" and _stages(result)["launch"] == "ok"
    ranks = result.stage("ranks")
    assert "No module named 'hpcprof_kit'" in ranks.detail
    assert "source <venv>/bin/activate" in ranks.fix
    assert _stages(result)["outputs"] == "skip"


def test_affinity_report_under_the_standin_shows_the_site_binding_of_the_plan(isolated_runs):
    result = rehearsed("aurora/affinity.sh", isolated_runs)  # 12 ranks, the site's binding
    assert result.ok, result.text()
    stdout = (Path(result.run_dir) / "stdout").read_text()
    # ALCF's 4-core list with the CCL cores kept free: rank 6 sits on socket 1 at 56-59.
    assert re.search(r"rank=0 local_rank=0 world_size=12 cpus=4-7 online=0-207 numa=0", stdout)
    assert re.search(r"rank=6 local_rank=6 world_size=12 cpus=56-59 online=0-207 numa=1", stdout)


def test_interactive_job_runs_the_script_inside_it_not_a_second_qsub(isolated_runs):
    spec = JobSpec(system="aurora", example="affinity", ranks_per_node=2, account="P")
    result = rehearse(spec, interactive=True, runs_root=isolated_runs)
    assert result.ok, result.text()
    assert "local backend (no second qsub)" in result.stage("start").detail
    manifest = (Path(result.run_dir) / "manifest.json").read_text()
    assert '"backend": "local"' in manifest


def test_a_second_qsub_from_inside_the_interactive_debug_job_is_refused(isolated_runs):
    # What the kit did before: qsub on PATH, so it submitted again from the attendee's job.
    spec = JobSpec(system="aurora", example="affinity", ranks_per_node=2, account="P")
    result = rehearse(spec, interactive=True, backend="pbs", runs_root=isolated_runs)
    assert result.failed_stage == "start"
    assert result.stage("start").detail == (
        "inside the interactive job the kit submitted a second job with qsub and PBS refused "
        "it: qsub: would exceed queue generic's per-user limit"
    )


def test_the_batch_job_starts_with_only_what_pbs_gives_it(isolated_runs):
    spec = JobSpec(system="polaris", example="affinity", ranks_per_node=1, account="P")
    result = rehearse(spec, runs_root=isolated_runs)
    assert result.ok, result.text()
    events = [
        json.loads(ln)
        for ln in (Path(result.run_dir) / "rehearsal_log.jsonl").read_text().splitlines()
    ]
    (start,) = [e for e in events if e["event"] == "job_start"]
    assert start["login_shell"] and start["shebang"] == "#!/bin/bash -l"
    assert "VIRTUAL_ENV" not in start["env"] and "HPCPROF_RUNS_DIR" not in start["env"]
    assert {"PBS_O_WORKDIR", "PBS_JOBID", "PBS_NODEFILE", "PBS_ENVIRONMENT", "HOME", "PATH"} <= set(
        start["env"]
    )


def _edited(tmp_path: Path, path: str, old: str, new: str) -> Path:
    text = (REPO / "jobs" / path).read_text()
    assert old in text
    target = tmp_path / "job.sh"
    target.write_text(text.replace(old, new))
    return target


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("#PBS -A YOUR_PROJECT\n", "", "qsub: Account_Name is required to be set."),
        ("#PBS -l filesystems=home:flare\n", "", "qsub: Resource: filesystems is required to be set."),
        ("walltime=00:10:00", "walltime=02:00:00", "qsub: Job violates queue and/or server resource limits"),
        ("walltime=00:10:00", "walltime=00:04:00", "qsub: Job violates queue and/or server resource limits"),
        ("select=1", "select=3", "qsub: Job violates queue and/or server resource limits"),
        ("select=1", "select=one", "qsub: Illegal attribute or resource value Resource_List.select"),
        ("#PBS -q debug", "#PBS -q debgu", "qsub: Unknown queue"),
    ],
)  # fmt: skip
def test_pbs_standin_refuses_what_alcf_refuses(tmp_path, isolated_runs, old, new, message):
    script = _edited(tmp_path, "aurora/seqpar.sh", old, new)
    result = rehearse(catalog_specs()["aurora/seqpar.sh"], script=script, runs_root=isolated_runs)
    assert result.failed_stage == "start"
    assert result.stage("start").detail == message
    assert result.stage("start").fix  # and says what to do


def test_a_reservation_queue_is_accepted_with_its_own_limits(tmp_path, isolated_runs):
    spec = JobSpec(system="aurora", example="affinity", ranks_per_node=2, account="P",
                   queue="R123456", walltime="02:00:00")  # fmt: skip
    with pytest.warns(UserWarning, match="R123456"):
        result = rehearse(spec, runs_root=isolated_runs,
                          reservations={"R123456": {"nodes": 2, "walltime": "04:00:00"}})  # fmt: skip
    assert result.ok, result.text()
    assert "queue R123456" in result.stage("start").detail


def test_a_module_the_site_lacks_fails_at_modules_as_lmod_does(isolated_runs):
    spec = JobSpec(system="aurora", tracer="unitrace", ranks_per_node=2, account="P")
    result = rehearse(spec, runs_root=isolated_runs, modules_missing=("pti-gpu",))
    assert result.failed_stage == "modules", result.text()
    assert result.stage("modules").detail == 'Lmod: the module "pti-gpu" is unknown here'
    stderr = (Path(result.run_dir) / "stderr").read_text()
    assert (
        'Lmod has detected the following error:  The following module(s) are unknown: "pti-gpu"'
        in stderr
    )


def test_a_launch_line_with_hydra_flags_is_refused_as_pals_does(isolated_runs):
    spec = JobSpec(system="polaris", example="affinity", ranks_per_node=2, account="P",
                   binding="none", command=["true"])  # fmt: skip
    with pytest.raises(LaunchRefused, match=r"mpiexec: unrecognized option '-bind-to'"):
        parse_args(["-n", "2", "-bind-to", "core", "true"])
    assert parse_args(["-n", "8", "--ppn", "4", "--pmi=pmix", "--env", "A=1", "-l", "x"]).env == {
        "A": "1"
    }
    assert rehearse(spec, runs_root=isolated_runs).ok


def test_each_rank_gets_the_variables_pals_sets(isolated_runs):
    names = ("PALS_RANKID", "PALS_LOCAL_RANKID", "PALS_LOCAL_SIZE", "PALS_NODEID", "PMI_RANK",
             "PMI_SIZE", "PMI_LOCAL_RANK", "PMIX_RANK")  # fmt: skip
    show = f"import os; print('VARS', *(os.environ.get(k, '-') for k in {names!r}))"
    for system, pmix in (("aurora", True), ("polaris", False)):
        spec = JobSpec(system=system, nodes=2, ranks_per_node=2, account="P", binding="none",
                       queue="debug-scaling" if system == "aurora" else "debug",
                       command=["python3", "-c", show])  # fmt: skip
        result = rehearse(spec, runs_root=isolated_runs)
        assert result.ok, result.text()
        lines = sorted(ln.split("VARS ", 1)[1] for ln in
                       (Path(result.run_dir) / "stdout").read_text().splitlines() if "VARS" in ln)  # fmt: skip
        pr = (lambda r: str(r)) if pmix else (lambda r: "-")
        assert lines == [f"{r} {r % 2} 2 {r // 2} {r} 4 {r % 2} {pr(r)}" for r in range(4)]


def test_polaris_seqpar_with_nsys_on_every_rank_records_only_the_captured_steps(isolated_runs):
    spec = catalog_specs()["polaris/seqpar-nsys.sh"]
    assert (spec.tracer, spec.trace_all, spec.capture_steps, spec.total_ranks) == (
        "nsys",
        True,
        "3-4",
        4,
    )
    result = rehearsed("polaris/seqpar-nsys.sh", isolated_runs)
    assert result.ok, result.text()
    outputs = result.stage("outputs").detail
    assert "nsys stand-in output for ranks 0, 1, 2, 3; each captured only steps 3-4" in outputs
    run = Path(result.run_dir)
    calls = [json.loads(line) for line in (run / "rehearsal_log.jsonl").read_text().splitlines()]
    tools = [c for c in calls if c.get("event") == "tool" and c.get("tool") == "nsys"]
    assert sorted(c["rank"] for c in tools) == [0, 1, 2, 3]
    assert all(c["options"]["--capture-range"] == "cudaProfilerApi" for c in tools)
    for rank in range(4):
        events = json.loads((run / "traces" / f"capture-{rank}-of-4.json").read_text())
        steps = {e["name"] for e in events["traceEvents"]
                 if e.get("name", "").startswith("ProfilerStep#")}  # fmt: skip
        assert steps == {"ProfilerStep#3", "ProfilerStep#4"}
