"""Tracer options: named flag sets, your own flags, every rank traced, and a capture range that
records only the chosen steps (the app wraps them in capture()); checked as script text, as the
argv a tool receives (a recording stand-in named as such), and in real local runs."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from hpcprof_kit.errors import SpecError
from hpcprof_kit.jobs import JobSpec, submit
from hpcprof_kit.tracer_ranks import traced_ranks
from hpcprof_kit.tracers import FLAG_SETS, TRACERS, flag_set_names

POLARIS = {"system": "polaris", "account": "P", "ranks_per_node": 4}


def _exec_line(spec: JobSpec) -> str:
    wrapper = spec.resolve().tracing.wrapper
    return next(line for line in wrapper.splitlines() if line.startswith("exec "))


@pytest.mark.parametrize(
    ("tracer", "system"),
    [("nsys", "polaris"), ("ncu", "polaris"), ("unitrace", "aurora")],
)
def test_each_flag_set_puts_exactly_its_flags_on_the_tool_line(tracer, system):
    base = JobSpec(system=system, account="P", ranks_per_node=4, tracer=tracer)
    assert flag_set_names(tracer)[0] in ("standard", "detailed")  # the default comes first
    for name, flags in FLAG_SETS[tracer].items():
        line = _exec_line(base.with_(tracer_set=name))
        program = " ".join(TRACERS[tracer]["program"]).replace("$RANK_VAR", "PMI_RANK")
        assert line.startswith(f"exec {program} " + " ".join(flags)), (name, line)
    if tracer == "ncu":  # ncu's set is its --set, which NCU_SET still overrides at run time
        wrapper = base.with_(tracer_set="roofline").resolve().tracing.wrapper
        assert 'ncu_args=(--set "${NCU_SET:-roofline}")' in wrapper


def test_the_default_set_is_the_guides_command():
    line = _exec_line(JobSpec(**POLARIS, tracer="nsys"))
    assert line == (
        'exec nsys profile -o "$out/${run}_%q{PMI_RANK}" --stats=true --show-output=true "$@"'
    )  # the ALCF Polaris guide's NSYS_OPTS


def test_unknown_set_and_options_without_a_tracer_are_refused_with_the_fix():
    with pytest.raises(SpecError, match=r"tracer_set 'huge' is not a flag set of nsys \(its sets: "
                       r"standard, minimal, host, full\)"):  # fmt: skip
        JobSpec(**POLARIS, tracer="nsys", tracer_set="huge").validate()
    with pytest.raises(SpecError, match="tracer_args .* needs a tracer"):
        JobSpec(**POLARIS, tracer_args=["--trace=mpi"]).validate()
    with pytest.raises(SpecError, match="trace_all=True needs a tracer"):
        JobSpec(**POLARIS, trace_all=True).validate()
    with pytest.raises(SpecError, match="trace_all=True traces every rank, but .*rankcutoff=4"):
        JobSpec(**POLARIS, tracer="nsys", trace_all=True, rankcutoff=4).validate()
    with pytest.raises(SpecError, match="tracer_args '--x' is a string; pass a list"):
        JobSpec(**POLARIS, tracer="nsys", tracer_args="--x")


def test_trace_all_traces_every_rank_and_says_so():
    spec = JobSpec(**{**POLARIS, "nodes": 2}, tracer="nsys", trace_all=True)
    script = spec.render()
    assert "# Vendor tracer wrapper (nsys): traces every rank (8); runs the others plainly." in (
        script
    )
    wrapper = spec.resolve().tracing.wrapper
    assert "PROFRANK" not in wrapper and 'exec "$@"' not in wrapper
    assert "# Traces every rank (8 ranks): one report each" in wrapper
    assert traced_ranks(8, 4, all_ranks=True) == list(range(8))


def _fake_tool(folder: Path, name: str) -> None:
    """A recording stand-in: prints its argv as JSON (what the real tool would receive)."""
    folder.mkdir(parents=True, exist_ok=True)
    tool = folder / name
    tool.write_text(f"#!{sys.executable}\nimport json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    tool.chmod(0o755)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(words=st.lists(st.text(alphabet=list("ab-=,/.$`\"'\\;|&<>(){}*? #~%"), min_size=1,
                              max_size=8), max_size=3))  # fmt: skip
@example(words=["--trace=cuda,nvtx,mpi", "$(touch PWNED)", "a b"])
def test_standin_tool_receives_exactly_your_extra_flags(words, tmp_path):
    spec = JobSpec(**POLARIS, tracer="nsys", tracer_args=words)
    try:
        wrapper = spec.resolve().tracing.wrapper
    except SpecError:
        return  # refused with the field named: fine
    (tmp_path / "tracer.sh").write_text(wrapper + "\n")
    _fake_tool(tmp_path / "bin", "nsys")
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "PMI_RANK": "0",
           "PALS_LOCAL_RANKID": "0", "HPCPROF_RUN_DIR": str(tmp_path / "run")}  # fmt: skip
    done = subprocess.run(["bash", "tracer.sh", "python3", "app.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=True)  # fmt: skip
    argv = json.loads(done.stdout)
    assert argv[-2 - len(words) :] == [*words, "python3", "app.py"]
    assert argv[:4] == [
        "profile",
        "-o",
        f"{tmp_path}/run/traces/nsys/run_%q{{PMI_RANK}}",
        "--stats=true",
    ]  # nsys expands %q
    assert not list(tmp_path.rglob("PWNED"))


def test_the_ready_seqpar_ncu_script_profiles_rank_0s_gemm_kernels_with_the_roofline_set(tmp_path):
    from hpcprof_kit.jobs.catalog import catalog_specs

    spec = catalog_specs()["polaris/seqpar-ncu.sh"]
    (tmp_path / "tracer.sh").write_text(spec.resolve().tracing.wrapper + "\n")
    _fake_tool(tmp_path / "bin", "ncu")
    env = {**os.environ, **spec.env, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
           "PMI_RANK": "0", "PALS_LOCAL_RANKID": "0", "HPCPROF_RUN_DIR": str(tmp_path / "run")}  # fmt: skip
    env.pop("NCU_SET", None)
    done = subprocess.run(["bash", "tracer.sh", "python3", "app.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=True)  # fmt: skip
    assert json.loads(done.stdout) == [
        "--set", "roofline", "-k", "regex:gemm|nvjet", "--profile-from-start", "off",
        "-o", f"{tmp_path}/run/traces/ncu/run_%q{{PMI_RANK}}", "python3", "app.py",
    ]  # fmt: skip
    assert "export NCU_KERNEL='regex:gemm|nvjet'" in spec.render()
    assert "--capture-steps 3-4" in spec.render()


def test_capture_steps_reach_the_app_and_the_tool():
    spec = JobSpec(**POLARIS, example="seqpar", tracer="nsys", trace_all=True, capture_steps="3-4")
    script = spec.render()
    assert script.rstrip().endswith(
        'bash "$HPCPROF_RUN_DIR/tracer.sh" python3 -m hpcprof_kit.apps.seqpar --capture-steps 3-4'
    )
    assert _exec_line(spec) == (
        'exec nsys profile -o "$out/${run}_%q{PMI_RANK}" --stats=true --show-output=true '
        '--capture-range=cudaProfilerApi --capture-range-end=stop "$@"'
    )
    aurora = JobSpec(system="aurora", account="P", ranks_per_node=12, tracer="unitrace",
                     capture_steps="2")  # fmt: skip
    assert " --conditional-collection " in _exec_line(aurora)
    ncu = spec.with_(tracer="ncu", trace_all=False)
    assert " --profile-from-start off " in _exec_line(ncu)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"capture_steps": "4-3"}, "capture_steps '4-3' is not 'A-B' with A <= B"),
        ({"capture_steps": "x"}, "capture_steps 'x' is not 'A-B'"),
        ({"capture_steps": "1", "example": "affinity"}, "example affinity takes no --capture"),
        ({"capture_steps": "1", "command": ["python3", "x.py"]}, "your own program takes no"),
        ({"capture_steps": "1", "profile": True}, "both choose the steps to record"),
    ],
)
def test_bad_capture_steps_are_refused_with_the_fix(fields, message):
    with pytest.raises(SpecError, match=message):
        JobSpec(system="local", **fields).validate()


def _captured_steps(trace: Path) -> list[int]:
    events = json.loads(trace.read_text())["traceEvents"]
    names = {e.get("name", "") for e in events}
    return sorted(int(n.split("#")[1]) for n in names if n.startswith("ProfilerStep#"))


@pytest.mark.parametrize(("example_name", "args"), [("seqpar", ["--steps", "5"]), ("train", [])])
def test_a_local_job_records_only_the_captured_steps(example_name, args, isolated_runs):
    spec = JobSpec(system="local", example=example_name, capture_steps="1-2", args=args,
                   binding="none")  # fmt: skip
    assert "export HPCPROF_CAPTURE=torch" in spec.render()  # no tracer: torch.profiler records
    job = submit(spec)
    assert job.wait(timeout=300, progress=False) == "COMPLETED", job.tail(stream="stderr")
    traces = sorted((job.run_dir / "traces").glob("capture-*-of-2.json"))
    assert [t.name for t in traces] == ["capture-0-of-2.json", "capture-1-of-2.json"]
    assert [_captured_steps(t) for t in traces] == [[1, 2], [1, 2]]
    assert not list((job.run_dir / "traces").glob("*cycle*"))  # one region, one file each


def test_the_cli_takes_the_tracer_options(capsys):
    from hpcprof_kit.cli import main

    argv = ["render", "--system", "polaris", "--account", "P", "--ranks-per-node", "4",
            "--example", "seqpar", "--tracer", "nsys", "--tracer-set", "minimal",
            "--tracer-arg=--mpi-impl=mpich", "--trace-all", "--capture-steps", "3-4"]  # fmt: skip
    assert main(argv) == 0
    script = capsys.readouterr().out
    flags = " ".join([*FLAG_SETS["nsys"]["minimal"], *TRACERS["nsys"]["capture"]])
    assert f'{flags} --mpi-impl=mpich "$@"' in script
    assert shlex.split(script.rstrip().splitlines()[-1])[-2:] == ["--capture-steps", "3-4"]
