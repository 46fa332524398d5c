"""Facts notebooks 01, 02, 06 and 09 teach, held against the kit's own data and the vendors' docs."""

from __future__ import annotations

import re
from pathlib import Path

import nbformat

from hpcprof_kit.nsight.plan import NCU_SETS, SET_BY_WALLTIME, choose_set
from hpcprof_kit.ondemand import dynolog_recipe
from hpcprof_kit.porting import port_file

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
ANSWER_KEY = NOTEBOOKS.parent / "docs" / "instructors.md"


def _nb(name: str):
    return nbformat.read(NOTEBOOKS / name, as_version=4)


def _text(nb) -> str:
    """Every cell's source and stored output, as one text."""
    parts = []
    for cell in nb.cells:
        parts.append(cell.source)
        for out in cell.get("outputs", []):
            parts.append(out.get("text", "") + str(out.get("data", {}).get("text/plain", "")))
    return "\n".join(parts)


def _stored_output(nb, first_line_has: str) -> str:
    (cell,) = [c for c in nb.cells if c.cell_type == "code" and first_line_has in c.source]
    return "".join(out.get("text", "") for out in cell.outputs)


def test_notebook_01_says_torch_compute_units_are_eus_not_xe_cores():
    text = _text(_nb("01_device_discovery.ipynb"))
    # the three wrong phrasings it used to have
    for wrong in (
        r"compute units \(Xe cores",
        r"`compute_units` counts Xe",
        r"Xe core \(compute unit",
    ):
        assert not re.search(wrong, text), wrong
    assert (
        "xpu   compute_units = EUs (execution units, also called Xe vector engines; 8 per Xe core)"
        in text
    )
    assert "an Aurora tile prints its EUs, 8 per Xe core" in text
    # the number itself is the exercise's answer: it lives in the instructors' answer key
    assert "`compute_units` of one tile = 448 (56 Xe cores x\n8 EUs)" in ANSWER_KEY.read_text()


def test_notebook_01_names_unitrace_options_for_ncu_metrics_and_says_the_guide_traces_only():
    text = _text(_nb("01_device_discovery.ipynb"))
    assert (
        "ncu (per-kernel metrics)       -> unitrace --metric-query --group GROUP, --stall-sampling"
        in text
    )
    assert "nsys (timeline)                -> unitrace --chrome-*-logging --device-timing" in text
    assert "what the ALCF unitrace guide runs: it shows tracing only" in text


def test_notebook_02_shows_the_in_process_mask_as_needing_a_human():
    # The report and the diff are the exercise's answer: the notebook prints them when run
    # (after the check), from the parameters cell's script, and stores neither.
    nb = _nb("02_xpu_code_changes.ipynb")
    assert 'script = "../examples/cuda_train_alcf_style.py"' in nb.cells[1].source
    assert "result = port_file(script, target, ipex=with_ipex)" in _text(nb)
    assert "print(result.report())" in _text(nb) and "print(result.diff())" in _text(nb)
    port = port_file(NOTEBOOKS.parent / "examples" / "cuda_train_alcf_style.py", "xpu", ipex=True)
    assert (
        port.report()
        .splitlines()[1]
        .startswith(
            'cuda_train_alcf_style.py:22: os.environ["ZE_AFFINITY_MASK"]  -- ZE_AFFINITY_MASK set inside'
        )
    )
    assert "+# needs a human: set ZE_AFFINITY_MASK in the job script" in port.diff()


def test_notebook_06_lists_the_ncu_sets_the_plan_chooses_from_and_its_walltime_rule():
    nb = _nb("06_vendor_profilers.ipynb")
    (step,) = [c.source for c in nb.cells if "with a section set (`--set`)" in c.source]
    sentence = step.split("with a section set (`--set`):", 1)[1].split("(more sections", 1)[0]
    assert set(re.findall(r"`(\w+)`", sentence)) == set(NCU_SETS)
    (rule,) = [
        c.source for c in nb.cells if "sized to the walltime per profiled launch" in c.source
    ]
    limits = [limit for limit, _name in SET_BY_WALLTIME]
    assert limits == [20 * 60, 60 * 60, None]
    assert (
        "`basic` under\n20 minutes, `detailed` under an hour, `full` beyond; `roofline` only when"
        in rule
    )
    plan = _stored_output(nb, "from hpcprof_kit.nsight import ncu_plan")
    assert "walltime 00:10:00 for 1 launch -> --set basic" in plan
    assert choose_set("00:10:00") == "basic" and "ncu --set basic -k " in plan


def test_notebook_06_renders_the_dynolog_recipe_and_says_the_file_trigger_stands_in():
    nb = _nb("06_vendor_profilers.ipynb")
    steps = int(re.search(r"ondemand_steps = (\d+)", nb.cells[1].source).group(1))
    recipe = _stored_output(nb, "from hpcprof_kit.ondemand import dynolog_recipe")
    assert recipe == dynolog_recipe("pbs", nodes=2, ranks_per_node=12, iterations=steps) + "\n"
    assert "gputrace --log-file" in recipe and f"--iterations {steps} --process-limit 12" in recipe
    assert "the kit's **file trigger stands in for\n`dyno gputrace`**" in _text(nb)


def test_notebook_09_names_every_problem_the_corpus_plants_and_stores_the_sweep_it_runs():
    from hpcprof_kit.jobs import JobSpec
    from hpcprof_kit.traces.corpus import KINDS, PATTERNS

    nb = _nb("09_capstone_diagnosis.ipynb")
    (table,) = [c.source for c in nb.cells if "| problem | what happens |" in c.source]
    named = re.findall(r"^\| `(\w+)` \|", table, flags=re.MULTILINE)
    assert sorted(named) == sorted((*KINDS, *PATTERNS))  # the patterns in a table of their own
    preview = _stored_output(nb, "# NBVAL_CHECK_OUTPUT\nfrom hpcprof_kit.jobs import JobSpec")
    args = ["--steps", "16", "--loader-ms", "40"]  # the notebook's, as the learner runs them
    spec = JobSpec(system="local", example="pathologies", ranks_per_node=2, args=args)
    sweep = spec.sweep(**{"--problem": ["data_loading", "none"]})
    assert preview == "\n".join(sweep.preview().splitlines()[:4]) + "\n"
    assert (
        "python3 -m hpcprof_kit.apps.pathologies --steps 16 --loader-ms 40 --problem none"
        in preview
    )


def test_notebook_03_prints_whole_lines_and_hydras_label_flag_labels_each_rank(mpiexec):
    """03's script prints one whole line per rank (one f-string holding its newline, end="",
    flush=True: one write), and the Hydra flag it names for labels, `mpiexec -l`, labels each
    rank's output with the real launcher. Run unbuffered, as batch scripts often run Python:
    there a plain print writes the text and its newline apart, and the notebook's form must
    still keep each line whole."""
    import ast
    import os
    import subprocess
    import sys

    nb = _nb("03_ddp_with_mpi.ipynb")
    script = next(c.source for c in nb.cells if c.source.startswith("%%writefile my_ddp.py"))
    tree = ast.parse(script.split("\n", 1)[1])
    prints = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
              and getattr(n.func, "id", "") == "print"]  # fmt: skip
    assert len(prints) == 1 and len(prints[0].args) == 1
    line = prints[0].args[0]
    assert isinstance(line, ast.JoinedStr) and line.values[-1].value.endswith("\n")
    keywords = {k.arg: k.value.value for k in prints[0].keywords}
    assert keywords == {"end": "", "flush": True}
    text = _text(nb)
    for flag in ("`mpiexec -l`", "`mpiexec --label\n--line-buffer`", "`srun --label`"):
        assert flag in text
    assert "`PYTHONUNBUFFERED=1`" in text
    code = "import os; print(f\"rank={os.environ['PMI_RANK']}\\n\", end='', flush=True)"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    done = subprocess.run([mpiexec, "-l", "-n", "2", sys.executable, "-c", code], env=env,
                          capture_output=True, text=True, timeout=120, check=True)  # fmt: skip
    # each line starts with its rank's label (this Hydra also labels the line's end: "[0] ")
    lines = sorted(done.stdout.splitlines())
    assert [re.fullmatch(r"\[(\d)\] rank=\1(?:\[\1\] )?", ln) is not None for ln in lines] == [
        True,
        True,
    ], lines
    assert [ln[:10] for ln in lines] == ["[0] rank=0", "[1] rank=1"]
