"""From an nsys summary to an ncu job: pick a heavy kernel, then profile only that kernel.

The guides' workflow (001): read the kernels nsys lists, pass one to ``ncu -k``, and size the
metric set to the walltime. :func:`ncu_plan` does it with the kit's job API: the plan's
``spec`` is a :class:`hpcprof_kit.jobs.JobSpec` with ``tracer="ncu"`` whose environment sets
the wrapper's ``NCU_KERNEL``, ``NCU_SET``, ``NCU_LAUNCH_SKIP`` and ``NCU_LAUNCH_COUNT``.

How the metric set follows the walltime (per profiled launch: walltime / launch_count) —
ncu replays each profiled launch once per pass, and the larger sets need many passes:

======================  ==========  =================================================
walltime per launch     ``--set``   why
======================  ==========  =================================================
under 20 minutes        basic       a few passes: launch stats, occupancy, SOL summary
20 minutes to 1 hour    detailed    adds memory and compute workload sections
1 hour or more          full        every section (dozens of passes per launch)
======================  ==========  =================================================

``roofline`` (the guides' other choice) is never picked by the rule; ask for it with
``ncu_set="roofline"``. The launches to skip are the first tenth of the kernel's launches on
that rank (warm-up, autotuning), at most 20.

>>> choose_set("00:10:00"), choose_set("00:30:00"), choose_set("02:00:00")
('basic', 'detailed', 'full')
>>> kernel_filter("void at::native::vectorized_elementwise_kernel<4, float>(int, float*)")
'vectorized_elementwise_kernel'
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hpcprof_kit.errors import SpecError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from hpcprof_kit.jobs import JobSpec

# (seconds per profiled launch below which the set fits, set); None: no upper bound.
SET_BY_WALLTIME: tuple[tuple[int | None, str], ...] = (
    (20 * 60, "basic"),
    (60 * 60, "detailed"),
    (None, "full"),
)
NCU_SETS = ("basic", "detailed", "full", "roofline")
MAX_LAUNCH_SKIP = 20
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")


def choose_set(walltime: str, launch_count: int = 1) -> str:
    """The ``--set`` the walltime affords (see the table above)."""
    from hpcprof_kit.jobs.spec import walltime_seconds

    per_launch = walltime_seconds(walltime) / max(launch_count, 1)
    for limit, name in SET_BY_WALLTIME:
        if limit is None or per_launch < limit:
            return name
    return SET_BY_WALLTIME[-1][1]  # pragma: no cover


def kernel_filter(name: str) -> str:
    """What ``ncu -k`` matches for a kernel nsys names: ncu compares the bare function name by
    default, so return type, namespaces, template and parameter lists go. A ``regex:...``
    filter passes through."""
    if name.startswith("regex:") or _IDENT.match(name):
        return name
    text = name.split("(", 1)[0]
    depth, base = 0, []
    for ch in text:  # drop template arguments, which may hold '::' and spaces themselves
        depth += ch == "<"
        if not depth:
            base.append(ch)
        depth -= ch == ">" and depth > 0
    bare = "".join(base).strip().split()[-1].split("::")[-1]
    return bare if _IDENT.match(bare) else "regex:" + re.escape(name)


@dataclass(frozen=True)
class NcuPlan:
    """An ncu job for one kernel: what it profiles, how, and the job that does it."""

    kernel: str  # the name nsys gave
    filter: str  # what -k gets
    ncu_set: str
    launch_skip: int
    launch_count: int
    rank: int
    calls: int  # the kernel's launches on that rank in the nsys run
    spec: JobSpec
    kernels: pd.DataFrame  # the rank's heaviest kernels, for the reader

    def ncu_args(self) -> list[str]:
        """The ncu options the job's wrapper will pass."""
        return ["--set", self.ncu_set, "-k", self.filter, "--launch-skip", str(self.launch_skip),
                "--launch-count", str(self.launch_count)]  # fmt: skip

    def script(self) -> str:
        """The job script (``JobSpec.render``)."""
        return self.spec.render()

    def summary(self) -> str:
        return (
            f"ncu on rank {self.rank}: kernel {self.kernel!r} ({self.calls} launches in the nsys "
            f"run) -> {' '.join(self.ncu_args())} within walltime {self.spec.walltime}"
        )


def _warn_if_too_big(ncu_set: str, walltime: str, launch_count: int) -> None:
    """A set the rule would not pick for this walltime is allowed, with a warning."""
    order = [name for _limit, name in SET_BY_WALLTIME]
    fits = choose_set(walltime, launch_count)
    if ncu_set in order and order.index(ncu_set) > order.index(fits):
        import warnings

        from hpcprof_kit.errors import KitWarning

        warnings.warn(
            f"--set {ncu_set} on {launch_count} launch(es) may outlive walltime {walltime} "
            f"(the rule picks {fits}); ask for a longer walltime or a smaller set",
            KitWarning,
            stacklevel=3,
        )


def _kernel_table(source: Any) -> pd.DataFrame:
    """The kernel summary from a DataFrame, a stats CSV file, or a run directory's reports."""
    import pandas as pd

    from hpcprof_kit.nsight.stats import by_name, read_stats, run_stats

    if isinstance(source, pd.DataFrame):
        return by_name(source)
    path = Path(source)
    if path.is_file():
        return by_name(read_stats(path.read_text(), "kernels", where=str(path)))
    return by_name(run_stats(path, "kernels"))


def _base_spec(source: Any, spec: JobSpec | None) -> JobSpec:
    if spec is not None:
        return spec
    from hpcprof_kit.jobs import JobSpec

    folder = Path(source) if isinstance(source, str | os.PathLike) else None
    if folder is not None and (folder / "spec.json").is_file():
        return JobSpec.from_json((folder / "spec.json").read_text())
    raise SpecError(
        "the ncu job needs the job it profiles: pass spec=JobSpec(system='polaris', ...) or a "
        "run directory that holds its spec.json"
    )


def find_kernel(kernels: pd.DataFrame, kernel: str | None, rank: int, top: int = 10) -> pd.Series:
    """The summary row of ``kernel`` (nsys name, bare function name, or ``regex:``) on
    ``rank``; the heaviest kernel when None. Unknown names are refused with the known ones."""
    rows = kernels[kernels["rank"] == rank] if "rank" in kernels.columns else kernels
    if rows.empty:
        where = f"rank {rank}" if "rank" in kernels.columns else "the summary"
        ranks = sorted(set(kernels["rank"])) if "rank" in kernels.columns else []
        raise SpecError(
            f"{where} has no kernels in the nsys summary"
            + (f" (ranks with kernels: {ranks})" if ranks else "")
            + "; profile with nsys --trace=cuda on a GPU node first"
        )
    rows = rows.sort_values("total_ns", ascending=False)
    if kernel is None:
        return rows.iloc[0]
    if kernel.startswith("regex:"):
        hit = rows[rows["name"].str.contains(kernel[6:], regex=True)]
    else:
        hit = rows[(rows["name"] == kernel) | (rows["name"].map(kernel_filter) == kernel)]
    if hit.empty:
        names = "; ".join(rows["name"].head(top))
        raise SpecError(
            f"kernel {kernel!r} is not in the nsys summary of rank {rank}; its heaviest "
            f"kernels are: {names}"
        )
    return hit.iloc[0]


def ncu_plan(
    source: Any,
    kernel: str | None = None,
    rank: int | None = None,
    *,
    spec: JobSpec | None = None,
    walltime: str | None = None,
    ncu_set: str | None = None,
    launch_count: int = 1,
    top: int = 10,
) -> NcuPlan:
    """Plan the ncu job for a kernel of an nsys run.

    ``source``: a run directory (its ``*.nsys-rep`` files are summarised with nsys, its
    ``spec.json`` is the job to repeat), a ``cuda_gpu_kern_sum``/``gpukernsum`` CSV file, or a
    kernel table. ``kernel``: default the heaviest on ``rank`` (default: the lowest rank).

    >>> import pandas as pd
    >>> from hpcprof_kit.jobs import JobSpec
    >>> kernels = pd.DataFrame({"name": ["ampere_sgemm_128x128_tn"], "calls": [200],
    ...                         "total_ns": [9_000_000]})
    >>> job = JobSpec(system="polaris", nodes=1, ranks_per_node=4, account="MYPROJ")
    >>> ncu_plan(kernels, spec=job).ncu_args()
    ['--set', 'basic', '-k', 'ampere_sgemm_128x128_tn', '--launch-skip', '20', '--launch-count', '1']
    """
    kernels = _kernel_table(source)
    base = _base_spec(source, spec)
    if rank is None:
        rank = int(kernels["rank"].min()) if "rank" in kernels.columns and len(kernels) else 0
    if not isinstance(launch_count, int) or launch_count < 1:
        raise SpecError(f"launch_count={launch_count!r} must be a whole number >= 1")
    if ncu_set is not None and ncu_set not in NCU_SETS:
        raise SpecError(f"ncu_set {ncu_set!r} is unknown; pick one of {', '.join(NCU_SETS)}")
    row = find_kernel(kernels, kernel, rank, top)
    calls = int(row["calls"])
    skip = max(0, min(calls // 10, MAX_LAUNCH_SKIP, calls - launch_count))
    walltime = walltime or base.walltime
    chosen = ncu_set or choose_set(walltime, launch_count)
    _warn_if_too_big(chosen, walltime, launch_count)
    name = str(row["name"])
    flt = kernel if kernel and kernel.startswith("regex:") else kernel_filter(name)
    env = {**base.env, "NCU_KERNEL": flt, "NCU_SET": chosen, "NCU_LAUNCH_SKIP": str(skip),
           "NCU_LAUNCH_COUNT": str(launch_count)}  # fmt: skip
    rpn = base.ranks_per_node
    job = base.with_(tracer="ncu", env=env, walltime=walltime, profrank=rank % rpn,
                     rankcutoff=rank + 1)  # fmt: skip
    job.validate()
    rows = kernels[kernels["rank"] == rank] if "rank" in kernels.columns else kernels
    table = rows.sort_values("total_ns", ascending=False).head(top).reset_index(drop=True)
    return NcuPlan(name, flt, chosen, skip, launch_count, rank, calls, job, table)
