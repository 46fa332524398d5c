"""Judge a rehearsed job stage by stage from what the twin logged and the run directory holds.

Each judge returns a :class:`~hpcprof_kit.rehearsal.run.Stage`; the first failure makes the
later stages SKIP, as on the site nothing after it would have happened.
"""

from __future__ import annotations

import re
from pathlib import Path

from hpcprof_kit.jobs import JobSpec
from hpcprof_kit.jobs.backends.outcome import read_job_end
from hpcprof_kit.rehearsal.report import RANK_FAILURES, Rehearsal, Stage, tail
from hpcprof_kit.rehearsal.twin import Twin


def judge(result: Rehearsal, twin: Twin, spec: JobSpec, outcome: dict, script_mode: bool) -> None:
    run_dir = Path(outcome["run_dir"]) if outcome.get("run_dir") else None
    checks = [
        lambda: _start(twin, outcome, result.mode),
        lambda: _modules(twin, run_dir),
        lambda: _launch(twin, run_dir),
        lambda: _ranks(twin, spec, run_dir),
        lambda: _outputs(twin, spec, outcome, run_dir, script_mode),
        lambda: _traces(spec, run_dir),
    ]
    if spec.example == "affinity" and spec.command is None:
        checks.append(lambda: _affinity(spec, run_dir))
    names = ["start", "modules", "launch", "ranks", "outputs", "traces", "affinity"]
    failed = False
    for name, check in zip(names, checks, strict=False):
        if failed:
            result.stages.append(Stage(name, "skip", "not reached: an earlier stage failed"))
            continue
        stage = check()
        result.stages.append(stage)
        failed = stage.status == "fail"
    for event in twin.events("launch"):
        if event.get("ok"):
            result.notes.append(_mapping_note(event))
    stderr = _read(run_dir / "stderr") if run_dir else ""
    for line in stderr.splitlines():
        if "does not resolve here" in line and "MASTER_ADDR" in line:
            result.notes.append("rendezvous name mapped: " + line.split("hpcprof-kit: ", 1)[-1])
            break


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def _mapping_note(event: dict) -> str:
    from hpcprof_kit.affinity.cpulist import format_cpus

    shown = [
        f"local rank {i}: site CPUs {format_cpus(site)} -> here {format_cpus(here)}"
        for i, (site, here) in enumerate(zip(event["site"], event["mapped"], strict=False))
    ]
    more = f"; ... ({len(shown)} local ranks)" if len(shown) > 3 else ""
    return (
        f"PALS --cpu-bind {event['cpu_bind'] or 'none'} mapped onto this machine's CPUs (site "
        f"CPU c runs on local CPU c mod n): {'; '.join(shown[:3])}{more}"
    )


def _start(twin: Twin, outcome: dict, mode: str) -> Stage:
    submitted = twin.events("qsub")
    if mode == "interactive" and submitted:
        refused = [e for e in submitted if not e["ok"]]
        why = f" and PBS refused it: {refused[0]['message']}" if refused else ""
        return Stage(
            "start", "fail",
            f"inside the interactive job the kit submitted a second job with qsub{why}",
            "inside an allocation run the script right there (the local backend with the "
            "allocation's nodefile); this kit's submit() does that",
        )  # fmt: skip
    refused = [e for e in submitted if not e["ok"]]
    if refused:
        return Stage("start", "fail", refused[0]["message"], _qsub_fix(refused[0]["message"]))
    if outcome.get("error"):
        return Stage("start", "fail", f"submission failed: {outcome['error']}")
    if mode == "interactive":
        return Stage(
            "start", "ok",
            f"ran inside the interactive job with the {outcome['backend']} backend (no second qsub)",
        )  # fmt: skip
    job = submitted[-1] if submitted else {}
    return Stage(
        "start", "ok",
        f"qsub accepted job {outcome.get('job_id')} (queue {job.get('queue')}, "
        f"{job.get('nodes')} node(s), walltime {job.get('walltime')}); started as PBS Pro does: "
        "login shell in $HOME, clean environment",
    )  # fmt: skip


def _qsub_fix(message: str) -> str:
    fixes = {
        "Account_Name": "pass account='<your project>' (JobSpec) or --account",
        "filesystems": "pass filesystems='home:flare' (Aurora) or 'home:eagle' (Polaris)",
        "Unknown queue": "use a queue of the system record, or the reservation's queue name",
        "violates queue": "fit nodes and walltime (at least 5 minutes) into the queue's limits",
        "per-user limit": "this queue takes one job per user: wait for the other job, or run "
        "inside it",
        "select": "write -l select=<nodes>[:system=...]",
    }
    return next((fix for key, fix in fixes.items() if key in message), "")


def _modules(twin: Twin, run_dir: Path | None) -> Stage:
    bad = [e for e in twin.events("module") if not e["ok"]]
    if bad:
        return Stage(
            "modules", "fail", f'Lmod: the module "{bad[0]["name"]}" is unknown here',
            "use a module the site offers (module avail); the system record lists them",
        )  # fmt: skip
    stderr = _read(run_dir / "stderr") if run_dir else ""
    if "module: command not found" in stderr:
        return Stage("modules", "fail", "module: command not found",
                     "start the script with '#!/bin/bash -l' so Lmod is initialised")  # fmt: skip
    for marker, fix in (("no Python environment at", "build the venv on a login node"),
                        ("is not on PATH after", "")):  # fmt: skip
        line = next((ln for ln in stderr.splitlines() if marker in ln), "")
        if line:
            return Stage("modules", "fail", line.replace("hpcprof-kit: ", "").strip(), fix)
    loaded = [e["name"] for e in twin.events("module") if e.get("action") == "load"]
    return Stage("modules", "ok", f"loaded {', '.join(loaded) or 'none'}")


def _launch(twin: Twin, run_dir: Path | None) -> Stage:
    launches = twin.events("launch")
    refused = [e for e in launches if not e["ok"]]
    if refused:
        return Stage("launch", "fail", refused[0]["message"], "use Cray PALS's flags")
    if not launches:
        last = tail(run_dir / "stderr") if run_dir else ""
        return Stage("launch", "fail", f"mpiexec was never reached ({last or 'no stderr'})")
    e = launches[-1]
    return Stage(
        "launch", "ok",
        f"mpiexec -n {e['ranks']} ({e['nodes']} node(s) x {e['ppn']}), --pmi={e['pmi']}, "
        f"--cpu-bind {e['cpu_bind'] or '(none)'}",
    )  # fmt: skip


def _ranks(twin: Twin, spec: JobSpec, run_dir: Path | None) -> Stage:
    ends = {e["rank"]: e["exit_code"] for e in twin.events("rank_end")}
    starts = {e["rank"] for e in twin.events("rank_start")}
    failed = sorted(r for r, code in ends.items() if code != 0)
    want = set(range(spec.total_ranks))
    pmix = any(e.get("pmix_missing") for e in twin.events("launch") if e["ok"])
    if not failed and set(ends) >= want:
        if pmix:
            return Stage("ranks", "fail", PMIX_MEANING, "launch with mpiexec --pmi=pmix")
        return Stage("ranks", "ok", f"{len(ends)} ranks ran and exited 0")
    stderr = _read(run_dir / "stderr") if run_dir else ""
    for pattern, meaning, fix in RANK_FAILURES:
        if pattern.search(stderr):
            return Stage("ranks", "fail", f"{meaning} (ranks {_few(failed)} exited non-zero)", fix)
    missing = sorted(want - starts)
    detail = (
        f"ranks {_few(failed)} exited non-zero" if failed else f"ranks {_few(missing)} never ran"
    )
    return Stage("ranks", "fail", f"{detail}: {tail(run_dir / 'stderr') if run_dir else ''}")


PMIX_MEANING = (
    "the ranks ran here, but the job exports CCL_PROCESS_LAUNCHER=pmix and launches without "
    "--pmi=pmix: no rank gets PMIX_RANK, and on the site oneCCL's init fails on every rank"
)


def _few(ranks: list[int]) -> str:
    return ", ".join(map(str, ranks[:6])) + (" ..." if len(ranks) > 6 else "") if ranks else "none"


def _traced_ranks(twin: Twin, tracer: str) -> list[int]:
    """The ranks the tracer's stand-in ran on (from the twin's log)."""
    return sorted({e["rank"] for e in twin.events("tool") if e["tool"] == tracer})


def _captured(run_dir: Path, spec: JobSpec, ranks: list[int]) -> tuple[str, str]:
    """Did each traced rank record exactly the captured steps (its capture() region)?"""
    from hpcprof_kit.profiling.ranges import parse_steps

    first, last = parse_steps(spec.capture_steps or "")
    want = list(range(first, last + 1))
    wrong = []
    for rank in ranks:
        path = run_dir / "traces" / f"capture-{rank}-of-{spec.total_ranks}.json"
        steps = _profiler_steps(path)
        if steps != want:
            wrong.append(f"rank {rank}: {'no capture trace' if steps is None else steps}")
    if wrong:
        return f"capture traces should hold steps {want} only: " + "; ".join(wrong[:3]), ""
    return "", f"; each captured only steps {first}-{last}"


def _profiler_steps(path: Path) -> list[int] | None:
    """The ProfilerStep#N numbers in a trace file (None when there is no file)."""
    import json

    if not path.is_file():
        return None
    events = json.loads(path.read_text()).get("traceEvents", [])
    names = {e.get("name", "") for e in events}
    return sorted(int(n.split("#")[1]) for n in names if re.fullmatch(r"ProfilerStep#\d+", n))


def _outputs(
    twin: Twin, spec: JobSpec, outcome: dict, run_dir: Path | None, script_mode: bool
) -> Stage:
    from hpcprof_kit.tracer_ranks import traced_ranks

    if run_dir is None:
        return Stage("outputs", "fail", "no run directory")
    problems = []
    if outcome.get("state") != "COMPLETED" or outcome.get("exit_code") != 0:
        problems.append(f"state {outcome.get('state')} exit code {outcome.get('exit_code')}")
    end = read_job_end(run_dir)
    if end is not None:
        recorded = end.exit_code
        if recorded != outcome.get("exit_code"):
            problems.append(
                f"job_end.json says {recorded}, the scheduler {outcome.get('exit_code')}"
            )
    elif not script_mode:
        problems.append("job_end.json is missing (the script records its own end)")
    for name in ("stdout", "stderr"):
        if not (run_dir / name).exists():
            problems.append(f"{name} missing (-k doe writes it into the run directory)")
    found = ""
    if spec.tracer:
        expect = traced_ranks(spec.total_ranks, spec.ranks_per_node, spec.profrank,
                              spec.rankcutoff, all_ranks=spec.trace_all)  # fmt: skip
        got = _traced_ranks(twin, spec.tracer)
        if got != expect:
            rule = "every rank" if spec.trace_all else "the seeds' rule selects"
            problems.append(f"{spec.tracer} traced ranks {got}, {rule} {expect}")
        found = f"; {spec.tracer} stand-in output for ranks {_few(got)}"
        if spec.capture_steps is not None:
            problem, note = _captured(run_dir, spec, expect)
            problems += [problem] if problem else []
            found += note
    if spec.profile:
        traces = sorted((run_dir / "traces").glob("*-of-*.json*"))
        if len(traces) != spec.total_ranks:
            problems.append(f"{len(traces)} profiler traces for {spec.total_ranks} ranks")
        found += f"; {len(traces)} profiler traces"
    if problems:
        return Stage("outputs", "fail", "; ".join(problems))
    return Stage("outputs", "ok", f"COMPLETED, exit code 0 (job_end.json agrees){found}")


def _traces(spec: JobSpec, run_dir: Path | None) -> Stage:
    from hpcprof_kit import traces

    assert run_dir is not None
    folders = [p for p in [run_dir / "traces", *sorted((run_dir / "traces").glob("*/"))]
               if list(p.glob("*.json")) or list(p.glob("*.json.gz"))]  # fmt: skip
    if not folders:
        return Stage("traces", "ok", "no traces to load (this job records none)")
    loaded = []
    for folder in folders:
        try:
            table = traces.load(folder, cache=False)
        except Exception as exc:  # a trace that does not load is the finding
            return Stage("traces", "fail", f"{folder.name}: {exc}")
        loaded.append(f"{folder.relative_to(run_dir)}: {len(table):,} events, ranks "
                      f"{_few(sorted(int(r) for r in table['rank'].unique()))}")  # fmt: skip
    return Stage("traces", "ok", "; ".join(loaded))


def _affinity(spec: JobSpec, run_dir: Path | None) -> Stage:
    from hpcprof_kit.affinity.report import compare, parse_report
    from hpcprof_kit.jobs.resolved import binding_preset

    assert run_dir is not None
    record = spec.system_record()
    preset = binding_preset(spec.binding, record)
    if preset == "none":
        return Stage("affinity", "ok", "no binding plan to compare")
    from hpcprof_kit.affinity import plan_for

    plan = plan_for(record, spec.ranks_per_node, preset)
    table = compare(plan, parse_report((run_dir / "stdout").read_text(errors="replace")))
    bad = table[table["verdict"] != "ok"]
    if len(bad):
        return Stage("affinity", "fail", "; ".join(bad["message"].head(3)))
    return Stage("affinity", "ok", f"every rank reports the CPUs of plan {preset!r} "
                 f"({len(table)} ranks per node x {len(set(table['host']))} node(s))")  # fmt: skip
