"""Notebook 09 agrees with itself: the report's ``steps`` table lists a straggler's steps by the
straggler rule's own test (before, every step's slowest rank by 1 %: steps 1, 3, 5, 6, 7 for
the recorded H100 run, whose key is steps 3 and 5, and rank 0 in steps 2 and 4); a generated
float32 run names no BFloat16 kernel; and the report cells below the checks show the report
only once the check passed, so Run All does not print the key under the check."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from hpcprof_kit import traces
from hpcprof_kit.exercises.nb09 import recorded_run, write_run
from hpcprof_kit.validate.answers import answer_key, answer_recorded

REPO = Path(__file__).resolve().parents[1]
NB09 = REPO / "notebooks" / "09_capstone_diagnosis.ipynb"
FP32_SEEDS = [s for s in range(40) if "no_tensor_cores" in answer_key(s)][:3]


def _steps_column(report) -> dict[int, str]:
    table = report.panes["overview"].tables["steps"]
    return dict(zip(table["rank"], table["straggler_in_steps"], strict=True))


def test_recorded_run_report_lists_no_straggler_step_outside_the_key():
    df = traces.load(recorded_run() / "traces")
    column = _steps_column(traces.report(df))
    ranks, steps = answer_recorded()["straggler"]
    listed = {r: [int(s) for s in v.split(",")] for r, v in column.items() if v}
    assert set(listed) <= set(ranks)  # rank 0 is no straggler
    assert all(set(found) <= set(steps) for found in listed.values()), listed


@pytest.mark.parametrize("seed", FP32_SEEDS)
def test_generated_float32_run_names_no_bfloat16_kernel(tmp_path, seed):
    df = traces.load(write_run(seed, tmp_path) / "traces")
    names = df.loc[df["track"] == "gpu", "name"].astype(str)
    assert not names.str.contains("BFloat16|bf16", regex=True).any()
    assert names.str.contains("<float>", regex=False).any()


def test_bfloat16_run_still_names_bfloat16_kernels(tmp_path):
    seed = next(s for s in range(40) if "no_tensor_cores" not in answer_key(s))
    df = traces.load(write_run(seed, tmp_path) / "traces")
    assert df.loc[df["track"] == "gpu", "name"].astype(str).str.contains("BFloat16").any()


def test_report_cells_show_the_report_only_once_the_check_passed():
    nb = nbformat.read(NB09, as_version=4)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    for check, flag in (("check_diagnosis(", "diagnosed"), ("check_recorded(", "recorded_ok")):
        at = next(i for i, s in enumerate(code) if check in s)
        assert f"{flag} = {check}" in code[at]
        below = next(s for s in code[at + 1 :] if "report" in s)
        assert below.startswith(("rep = traces.report(df)\nif diagnosed:", "if recorded_ok:"))
        assert "display(" in below and "The report answers the check above" in below
