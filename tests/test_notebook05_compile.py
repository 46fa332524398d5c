"""Notebook 05's compile comparison on real runs: where torch.compile goes decides what Inductor
compiles, read from each run's trace (torch 2.13 on this CPU).

``torch.compile(DDP(model))`` (the ATPESC guide's form, the train app's default) breaks the graph
in DDP's own Python, and the model runs eagerly: its ``aten::linear`` calls stay, outside any
compiled graph. ``DDP(torch.compile(model))`` (``--compile-where model``) compiles the model: no
``aten::linear`` is left, and its matrix products run inside ``## Call CompiledFxGraph``.

The notebook sweeps the one flag ``--compile-where`` over ``none``, ``ddp`` and ``model``: a
form given there compiles without ``--compile``, and ``none`` with ``--compile`` is refused.
"""

from __future__ import annotations

import json

import pytest

from hpcprof_kit import traces
from hpcprof_kit.apps.train import build_parser, compile_form
from hpcprof_kit.errors import SpecError
from hpcprof_kit.exercises.nb05 import compiled_or_eager
from hpcprof_kit.jobs import JobSpec, submit, wait_for

ARGS = ("--epochs", "1", "--steps-per-epoch", "4", "--prof-wait", "1", "--prof-warmup", "1",
        "--prof-active", "2", "--prof-repeat", "1")  # fmt: skip


def _run(where: str):
    spec = JobSpec(system="local", example="train", profile=True, ranks_per_node=1,
                   args=(*ARGS, "--compile-where", where))  # fmt: skip
    job = submit(spec)
    assert wait_for(job, timeout=1200, progress=False) == "COMPLETED", job.tail(20, "stderr")
    (timing,) = (job.run_dir / "timings").glob("*.json")
    return job, json.loads(timing.read_text())


@pytest.mark.jobs  # a real compiled job each: left out of `make test-quick`
@pytest.mark.parametrize("where", ["ddp", "model"])
def test_where_to_compile_decides_which_ops_run_compiled(where):
    job, timing = _run(where)
    assert timing["params"]["compile"] is True and timing["params"]["compile_where"] == where
    ran = compiled_or_eager(traces.load(job.run_dir))
    if where == "ddp":  # nothing of the model compiled: every linear layer eager
        assert ran.loc["aten::linear", "eager"] > 0
        assert ran["compiled"].sum() == 0, ran
    else:  # the model compiled: no linear left, its products inside Inductor's graphs
        assert ran.loc["aten::linear"].sum() == 0, ran
        assert ran.loc["aten::mm", "compiled"] > 0 and ran["eager"].sum() == 0, ran


@pytest.mark.parametrize(("flags", "form"), [
    ([], None), (["--compile-where", "none"], None), (["--compile"], "ddp"),
    (["--compile-where", "ddp"], "ddp"), (["--compile-where", "model"], "model"),
    (["--compile", "--compile-where", "model"], "model"),
])  # fmt: skip
def test_the_sweep_values_of_compile_where_name_the_form(flags, form):
    assert compile_form(build_parser().parse_args(flags)) == form


def test_compile_with_compile_where_none_is_refused_with_the_fix():
    args = build_parser().parse_args(["--compile", "--compile-where", "none"])
    with pytest.raises(SpecError, match="--compile with --compile-where none.*drop one of them"):
        compile_form(args)
