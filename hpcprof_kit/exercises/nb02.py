"""Notebook 02 exercise: predict which lines of a CUDA script no tool can port to XPU for you."""

from __future__ import annotations

from pathlib import Path

from hpcprof_kit.exercises import feedback

# The CUDA "before" picture of notebook 02, in the repository's examples.
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cuda_train_alcf_style.py"

# What would give the answer away above the check cell (tests/test_exercises_hidden.py):
# "text" patterns no output or markdown above may match, "code" names no code cell above may use.
HIDDEN = {
    "check_needs_a_human": {
        "text": [
            r"\.py:\d+: ",
            r"# needs a human:",
            r"not ported \(",
            r"(?i)\blines? 22\b",
            r"\b22 and 27\b",
            r"\[22, 27\]",
        ],
        "code": ["port_file", "port_source", "not_ported", "needs_a_human", "report"],
        "answer": "needs_a_human",
    },
}


def needs_a_human(script: str | Path = EXAMPLE) -> list[int]:
    """The line numbers the XPU port leaves to a human.

    >>> needs_a_human()
    [22, 27]
    """
    from hpcprof_kit.porting import port_file

    return sorted({line for line, _code, _why in port_file(script, "xpu").not_ported if line})


def check_needs_a_human(lines: list[int] | None, script: str | Path = EXAMPLE) -> bool:
    """Check the learner's prediction: which lines of the script can no tool port to XPU?

    >>> check_needs_a_human([27])
    Not yet. Hint: one line switches a library XPU does not use; another sets something the GPU runtime reads only once, when it starts.
    False
    """
    right = needs_a_human(script)
    return feedback(
        sorted(set(lines or [])) == right,
        hint="one line switches a library XPU does not use; another sets something the GPU "
        "runtime reads only once, when it starts.",
        well_done=f"Correct - lines {right}: the device mask set inside the process (it belongs "
        "in the job script) and the cuDNN switch (oneDNN has none). The port lists both.",
    )
