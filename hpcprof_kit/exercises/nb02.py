"""Notebook 02 exercise: predict which lines of a CUDA script no tool can port to XPU for you."""

from __future__ import annotations

from pathlib import Path

from hpcprof_kit.exercises import feedback

# The CUDA "before" picture of notebook 02, in the repository's examples.
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cuda_train_alcf_style.py"


def _needs_a_human(script: str | Path = EXAMPLE) -> list[int]:
    """The line numbers the XPU port leaves to a human (the check's truth, private: the
    notebook's answer is in the instructors' key, :mod:`hpcprof_kit.validate.answers`)."""
    from hpcprof_kit.porting import port_file

    return sorted({line for line, _code, _why in port_file(script, "xpu").not_ported if line})


def check_needs_a_human(lines: list[int] | None, script: str | Path = EXAMPLE) -> bool:
    """Check the learner's prediction: which lines of the script can no tool port to XPU?

    >>> check_needs_a_human([27])
    Not yet. Hint: one line switches a library XPU does not use; another sets something the GPU runtime reads only once, when it starts.
    False
    """
    from hpcprof_kit.porting import broken_rendezvous

    right = _needs_a_human(script)
    broken = [n for n, _, _ in broken_rendezvous(Path(script).read_text())]
    wrong_anywhere = sorted(set(lines or []) & set(broken))
    also = ""
    if wrong_anywhere:
        also = (f" Line {', '.join(map(str, wrong_anywhere))} is wrong on CUDA too (the port "
                "report flags it): it needs a fix, not a port.")  # fmt: skip
    return feedback(
        sorted(set(lines or [])) == right,
        hint="one line switches a library XPU does not use; another sets something the GPU "
        "runtime reads only once, when it starts." + also,
        well_done=f"Correct - lines {right}: the device mask set inside the process (it belongs "
        "in the job script) and the cuDNN switch (oneDNN has none). The port lists both.",
    )
