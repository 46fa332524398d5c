"""A cut last step set aside in traces of two steps.

The view sets aside a rank's last step when the recording cut it short, judged against the
median of the steps before it: from three steps on. With two, the one step before is all
there is to judge by, and it is often the warm-up, several times a steady step: a last
step is taken as cut only when it is under :data:`CUT_SHARE` of it, far below anything a
warm-up makes (a ROCm trace's 49 µs last step after a 9.3 ms first).
"""

from __future__ import annotations

import dataclasses

from hpcprof_kit.traces.view.run_view import RunView, rank_walls

CUT_SHARE = 0.1  # a second step under a tenth of the first was cut, not warmed up


def two_step_cuts(view: RunView) -> set[tuple[int, int]]:
    """(rank, step) of the last steps of ranks with exactly two steps that are under
    :data:`CUT_SHARE` of the first."""
    out = set()
    for rank, steps, wall in rank_walls(view.b):
        if wall.size == 2 and wall[1] < CUT_SHARE * wall[0]:
            out.add((int(rank), int(steps[1])))
    return out


def without_cut_steps(view: RunView) -> RunView:
    """``view``, or, when a two-step rank's last step was cut, the same run with that step
    set aside as the view sets aside a cut step of a longer trace (its ``truncated``): the
    rules read its :attr:`~RunView.rows` without it. The findings and reasons the rules
    leave stay in the same dicts as ``view``'s."""
    cut = two_step_cuts(view) - view.truncated
    if not cut:
        return view
    out = dataclasses.replace(view)  # the same parts, its prepared ones made anew
    out.__dict__["truncated"] = view.truncated | cut
    return out
