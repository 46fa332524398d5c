"""Self-checks of notebook 07 (the affinity exercise). Their answers are in the instructors'
key (:mod:`hpcprof_kit.validate.answers`), which no notebook imports.

>>> check_polaris_list("list:0-7:8-15:16-23:24-31")  # doctest: +ELLIPSIS
Not yet. Hint: rank 0 runs in NUMA domain(s) [0] but drives GPU0, which sits next to NUMA 3: ...
False
"""

from __future__ import annotations

from hpcprof_kit.errors import KitError
from hpcprof_kit.exercises import feedback


def check_polaris_list(cpu_bind: str) -> bool:
    """Is ``cpu_bind`` a 4-rank Polaris list the checks accept (rank i next to GPU i)?"""
    from hpcprof_kit.affinity import plan_for

    if not cpu_bind:
        return feedback(False, hint="write your list: 'list:' then one CPU range per rank, "
                        "rank 0's first, joined by ':' (as --cpu-bind takes it).")  # fmt: skip
    try:
        plan = plan_for("polaris", 4, cpu_bind)
    except KitError as exc:
        return feedback(False, hint=f"the list does not parse: {exc}")
    # what the check saw, not the fix: the CPUs to bind to are the learner's to find
    first = plan.findings[0].message.split("; bind it to")[0] if plan.findings else ""
    return feedback(
        not plan.findings,
        hint=f"{first}. Which CPUs belong to which NUMA domain? The table of section 2 says.",
        well_done="Correct - every rank sits next to its GPU, no core shared or reserved.",
    )


def _cpus_per_rank(experiment) -> dict[str, int | list[int]]:
    """Plan -> how many CPUs ``os.sched_getaffinity`` let each of its ranks run on, read from
    the affinity report each rank printed (a list, rank by rank, where the ranks differ): the
    check's truth, private (instructors: ``hpcprof_kit.validate.answers.cpus_per_rank``).

    >>> class Ran:  # an experiment whose plan 'core' gave each of 2 ranks one CPU
    ...     plans = {"core": None}
    ...     def report(self, name):
    ...         from hpcprof_kit.affinity.report import parse_report
    ...         return parse_report("\\n".join(
    ...             f"affinity_report host=a rank={r} local_rank={r} world_size=2 cpus={r} "
    ...             "online=0-1 numa=0 device=cpu" for r in (0, 1)))
    >>> _cpus_per_rank(Ran())
    {'core': 1}
    """
    counts = {}
    for name in experiment.plans:
        got = experiment.report(name).sort_values("rank")["n_cpus"].astype(int).tolist()
        counts[name] = got[0] if len(set(got)) == 1 else got
    return counts


def check_cpus_per_rank(prediction: dict, experiment) -> bool:
    """How many CPUs may each rank of each plan run on? Checked against what the ranks of the
    experiment's jobs really got; a wrong plan is named, its number is not."""
    truth = _cpus_per_rank(experiment)
    if not isinstance(prediction, dict) or set(map(str, prediction)) != set(truth):
        return feedback(False, hint=f"give one number per plan, as {{plan: CPUs}} for the "
                        f"plans {', '.join(truth)}")  # fmt: skip
    wrong = sorted(name for name in truth if prediction.get(name) != truth[name])
    return feedback(
        not wrong,
        hint=f"{', '.join(repr(w) for w in wrong)} is off. A rank bound to cores may run on "
        "those cores only; a rank the launcher does not bind may run on every CPU the machine "
        "has online (os.cpu_count()). Look at each plan's launcher flag in section 3.",
        well_done="Correct - a plan that binds nothing leaves each rank free to run on any CPU, "
        "so the OS can move it mid-step; the comparison calls such a rank 'unbound'.",
    )
