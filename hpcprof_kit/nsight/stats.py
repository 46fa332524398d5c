"""``nsys stats`` summaries as tables: kernels, CUDA API, GPU memory, OS runtime, NVTX.

Nsight Systems renamed its reports in 2023 (``gpukernsum`` became ``cuda_gpu_kern_sum``, ...);
:data:`REPORTS` knows both generations, so a summary is asked for by what it is (``"kernels"``)
or by either tool name. Every table has the kit's columns: ``name, calls, total_ns, avg_ns,
med_ns, min_ns, max_ns, stddev_ns, share`` (``share`` is a fraction of the report's total, not
a percent), plus ``style`` for NVTX and ``grid``/``block`` where nsys gives them.

>>> text = '''Processing [rep_0.sqlite] with [osrtsum.py]...
... Time (%),Total Time (ns),Num Calls,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Name
... 74.3,30187037,3,10062345.7,10062673.0,10060218,10064146,1984.4,clock_nanosleep
... '''
>>> table = read_stats(text, "osrtsum")
>>> print(*table.loc[0, ["name", "calls", "total_ns", "share"]])
clock_nanosleep 3 30187037 0.743
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hpcprof_kit.errors import TraceFormatError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


@dataclass(frozen=True)
class Report:
    """One kind of ``nsys stats`` summary: its report names (2022.4 first) and key columns."""

    kind: str
    names: tuple[str, ...]
    calls: str  # the header of the count column
    label: str  # the header of the name column
    extra: tuple[str, ...] = ()  # optional columns kept when present


REPORTS: dict[str, Report] = {
    r.kind: r
    for r in (
        Report("kernels", ("gpukernsum", "cuda_gpu_kern_sum"), "Instances", "Name",
               ("GridXYZ", "BlockXYZ")),
        Report("cuda_api", ("cudaapisum", "cuda_api_sum"), "Num Calls", "Name"),
        Report("memory_time", ("gpumemtimesum", "cuda_gpu_mem_time_sum"), "Count", "Operation"),
        Report("os_runtime", ("osrtsum", "osrt_sum"), "Num Calls", "Name"),
        Report("nvtx", ("nvtxsum", "nvtx_sum"), "Instances", "Range", ("Style",)),
    )
}  # fmt: skip
COLUMNS = (
    "name",
    "calls",
    "total_ns",
    "avg_ns",
    "med_ns",
    "min_ns",
    "max_ns",
    "stddev_ns",
    "share",
)
EXTRA_NAMES = {"GridXYZ": "grid", "BlockXYZ": "block", "Style": "style"}
# "<stat> (<unit>)" headers; nsys --timeunit changes the unit, the kit keeps ns.
_TIMED = {"Total Time": "total_ns", "Avg": "avg_ns", "Med": "med_ns", "Min": "min_ns",
          "Max": "max_ns", "StdDev": "stddev_ns"}  # fmt: skip
_UNIT_NS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_HEADER = re.compile(r"^(?P<stat>[A-Za-z ]+?) \((?P<unit>ns|us|ms|s)\)$")
# Lines nsys prints around the CSV (progress, notices) rather than in it.
_CHATTER = (
    "Processing [",
    "** ",
    "SKIPPED:",
    "NOTICE:",
    "WARNING:",
    "Generating",
    "[1/",
    "Exporting",
)


def report_for(name: str) -> Report:
    """The :class:`Report` for a kind (``"kernels"``) or a report name of either generation.

    >>> report_for("cuda_gpu_kern_sum").names
    ('gpukernsum', 'cuda_gpu_kern_sum')
    """
    if name in REPORTS:
        return REPORTS[name]
    for report in REPORTS.values():
        if name in report.names:
            return report
    known = ", ".join(f"{r.kind} ({'/'.join(r.names)})" for r in REPORTS.values())
    raise TraceFormatError(f"nsys report {name!r} is not one the kit reads; known: {known}")


def _csv_lines(text: str, where: str) -> list[str]:
    lines = [line for line in text.splitlines() if line.strip()]
    for line in lines:
        if line.startswith("ERROR"):
            raise TraceFormatError(f"{where}: nsys said {line.strip()!r}")
    return [line for line in lines if not line.lstrip().startswith(_CHATTER)]


def read_stats(text: str, report: str, where: str = "nsys stats output") -> pd.DataFrame:
    """Parse ``nsys stats --format csv`` text of one report into the kit's table.

    A layout without the expected columns is refused with the columns expected and found.
    """
    import pandas as pd

    spec = report_for(report)
    lines = _csv_lines(text, where)
    if not lines:  # nsys -q prints nothing for a report with no rows
        return pd.DataFrame({c: pd.Series(dtype=_dtype(c)) for c in COLUMNS})
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    header, body = [h.strip() for h in rows[0]], rows[1:]
    mapping = _map_header(header, spec, where)
    columns = {}
    for i, source in enumerate(header):
        if source in mapping:
            columns[mapping[source]] = [row[i] if i < len(row) else "" for row in body]
    table = pd.DataFrame(columns)
    return _typed(table, header, mapping)


def _map_header(header: list[str], spec: Report, where: str) -> dict[str, str]:
    mapping = {"Time (%)": "share", spec.calls: "calls", spec.label: "name"}
    for source in header:
        m = _HEADER.match(source)
        if m and m.group("stat") in _TIMED:
            mapping[source] = _TIMED[m.group("stat")]
    mapping.update({h: EXTRA_NAMES[h] for h in spec.extra if h in header})
    found = {mapping[h] for h in header if h in mapping}
    if not set(COLUMNS) <= found:
        expected = ["Time (%)", "Total Time (ns)", spec.calls, "Avg (ns)", "Med (ns)",
                    "Min (ns)", "Max (ns)", "StdDev (ns)", spec.label]  # fmt: skip
        raise TraceFormatError(
            f"{where} is not an nsys {'/'.join(spec.names)} report in a layout the kit knows: "
            f"expected columns {expected}, found {header}; export it with "
            f"'nsys stats --report {spec.names[-1]} --format csv'"
        )
    return {h: mapping[h] for h in header if h in mapping}


def _dtype(column: str) -> str:
    return {"name": "object", "calls": "int64", "total_ns": "int64", "min_ns": "int64",
            "max_ns": "int64"}.get(column, "float64")  # fmt: skip


def _typed(table: pd.DataFrame, header: list[str], mapping: dict[str, str]) -> pd.DataFrame:
    import pandas as pd

    scale = {mapping[h]: _UNIT_NS[_HEADER.match(h).group("unit")] for h in header
             if mapping.get(h, "").endswith("_ns")}  # fmt: skip
    for column in COLUMNS[1:]:
        values = pd.to_numeric(table[column].str.replace(",", ""), errors="raise")
        values = values * scale.get(column, 1)
        if column == "share":
            values = values / 100.0
        table[column] = values.round().astype("int64") if _dtype(column) == "int64" else values
    extra = [c for c in table.columns if c not in COLUMNS]
    return table[[*COLUMNS, *extra]]


# ---- running nsys ---------------------------------------------------------------------------


def find_nsys(nsys: str | None = None) -> str:
    """The ``nsys`` to run: the argument, else ``$HPCPROF_NSYS``, else ``nsys`` on PATH."""
    found = nsys or os.environ.get("HPCPROF_NSYS") or shutil.which("nsys")
    if not found:
        raise TraceFormatError(
            "nsys is not on PATH (nor named by HPCPROF_NSYS): load the site's Nsight module "
            "(Polaris: module load nvhpc), or install Nsight Systems locally to read reports"
        )
    return found


def nsys_stats(rep: str | os.PathLike[str], report: str, nsys: str | None = None) -> pd.DataFrame:
    """Run ``nsys stats --report X --format csv -q REP`` and parse it.

    ``report`` is a kind or a report name of either generation; when this nsys does not know
    that name, the other generation's name for the same summary is tried. Needs nsys.
    """
    spec = report_for(report)
    names = (report, *(n for n in spec.names if n != report)) if report != spec.kind else spec.names
    tool, last = find_nsys(nsys), ""
    for name in names:
        cmd = [tool, "stats", "--report", name, "--format", "csv", "-q", str(rep)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if "could not be found" in done.stdout + done.stderr:  # named the other way here
            last = (done.stdout + done.stderr).strip()
            continue
        if done.returncode:
            output = (done.stdout + done.stderr)[-500:]
            raise TraceFormatError(f"{' '.join(cmd)} failed ({done.returncode}): {output}")
        return read_stats(done.stdout, name, where=f"{rep} ({name})")
    raise TraceFormatError(f"{rep}: this nsys knows none of {list(names)} ({last})")


_RANK_OF_REP = re.compile(r"_(\d+)\.nsys-rep$")


def rank_reports(run_dir: str | os.PathLike[str]) -> dict[int, Path]:
    """The ``*.nsys-rep`` files under a run directory by rank (``<run>_<rank>.nsys-rep``, the
    name ``-o ..._%q{PMI_RANK}`` gives)."""
    folder = Path(run_dir)
    reps = sorted(folder.rglob("*.nsys-rep"))
    if not reps:
        raise TraceFormatError(
            f"{folder} holds no *.nsys-rep report; run the job with tracer='nsys' (the reports "
            "land in traces/nsys/), or point at the folder that holds them"
        )
    by_rank: dict[int, Path] = {}
    for path in reps:
        m = _RANK_OF_REP.search(path.name)
        rank = int(m.group(1)) if m else len(by_rank)
        by_rank.setdefault(rank, path)
    return dict(sorted(by_rank.items()))


def run_stats(
    run_dir: str | os.PathLike[str], report: str, nsys: str | None = None
) -> pd.DataFrame:
    """One report for every rank's ``.nsys-rep`` in a run directory, with a ``rank`` column."""
    import pandas as pd

    tables = []
    for rank, rep in rank_reports(run_dir).items():
        table = nsys_stats(rep, report, nsys=nsys)
        table.insert(0, "rank", rank)
        tables.append(table)
    return pd.concat(tables, ignore_index=True)


def by_name(table: pd.DataFrame) -> pd.DataFrame:
    """One row per name (and rank): nsys 2022.4's kernel summary splits a kernel by launch
    shape (GridXYZ/BlockXYZ). Merged rows keep exact sums, min and max; their median and
    standard deviation cannot be recombined and become NaN.

    >>> import pandas as pd
    >>> t = pd.DataFrame({"name": ["k", "k"], "calls": [2, 1], "total_ns": [4, 5],
    ...     "avg_ns": [2.0, 5.0], "med_ns": [2.0, 5.0], "min_ns": [1, 5], "max_ns": [3, 5],
    ...     "stddev_ns": [1.0, 0.0], "share": [0.4, 0.5]})
    >>> by_name(t)[["name", "calls", "total_ns", "avg_ns", "min_ns", "max_ns"]].values.tolist()
    [['k', 3, 9, 3.0, 1, 5]]
    """
    keys = [k for k in ("rank", "name") if k in table.columns]
    if not table.duplicated(keys).any():
        return table
    merged = table.groupby(keys, as_index=False, sort=False).agg(
        calls=("calls", "sum"), total_ns=("total_ns", "sum"), min_ns=("min_ns", "min"),
        max_ns=("max_ns", "max"), share=("share", "sum"), count=("calls", "size"),
    )  # fmt: skip
    single = table.drop_duplicates(keys, keep=False).set_index(keys)
    merged["avg_ns"] = merged["total_ns"] / merged["calls"]
    for column in ("med_ns", "stddev_ns"):
        merged[column] = [
            single.loc[tuple(k) if len(keys) > 1 else k[0], column] if n == 1 else float("nan")
            for k, n in zip(merged[keys].values.tolist(), merged["count"], strict=True)
        ]
    columns = [*keys, *(c for c in COLUMNS if c != "name")]
    return merged[columns].sort_values("total_ns", ascending=False, ignore_index=True)
