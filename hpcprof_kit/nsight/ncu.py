"""Nsight Compute's CSV exports as tables: ``--page raw`` (one row per kernel launch, one column
per metric) and ``--page details`` (one row per metric of a section), and the roofline numbers.

Units are made uniform on load: a duration becomes ns (unit ``nsecond``), a rate becomes per
second (``byte/second``, ``cycle/second``), byte counts become bytes; thousands separators go.

>>> text = '''"ID","Kernel Name","Section Name","Metric Name","Metric Unit","Metric Value"
... "0","ampere_sgemm_128x128_tn","GPU Speed Of Light Throughput","Duration","usecond","52.16"
... '''
>>> row = read_ncu_details(text).iloc[0]
>>> row["name"], row["metric"], row["unit"], float(row["value"])
('ampere_sgemm_128x128_tn', 'Duration', 'nsecond', 52160.0)
"""

from __future__ import annotations

import csv
import io
import re
from typing import TYPE_CHECKING

from hpcprof_kit.errors import TraceFormatError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

# Identity columns of both pages (ncu 2022 has "Kernel Time"; 2023+ adds Block/Grid Size, CC).
IDENTITY = {
    "ID": "id",
    "Process ID": "pid",
    "Process Name": "process",
    "Host Name": "host",
    "Kernel Name": "name",
    "Function Name": "name",
    "Kernel Time": "kernel_time",
    "Context": "context",
    "Stream": "stream",
    "Block Size": "block",
    "Grid Size": "grid",
    "Device": "device",
    "CC": "cc",
}
DETAILS = {"Section Name": "section", "Metric Name": "metric", "Metric Unit": "unit",
           "Metric Value": "value"}  # fmt: skip
# The details page's rule rows (no metric): ncu's own advice and the speedup it estimates.
RULES = {"Section Name": "section", "Rule Name": "rule", "Rule Type": "type",
         "Estimated Speedup Type": "speedup_scope", "Estimated Speedup": "speedup_pct",
         "Rule Description": "advice"}  # fmt: skip
_PREFIX = {"": 1.0, "K": 1e3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
           "n": 1e-9, "u": 1e-6, "m": 1e-3}  # fmt: skip
_PER = {
    "": 1.0,
    "K": 1e-3,
    "k": 1e-3,
    "M": 1e-6,
    "G": 1e-9,
    "T": 1e-12,
    "n": 1e9,
    "u": 1e6,
    "m": 1e3,
}  # fmt: skip  (exact inverses: per nsecond = x 1e9)
# ncu spells units two ways: "usecond", "Gbyte/second", "cycle/nsecond" (older releases, the
# documented layout) and "us", "Gbyte/s", "Ghz" (2025.3, read off a real H100 export).
_UNIT = re.compile(r"^(?P<prefix>[KkMGTnum]?)(?P<base>byte|second|s|cycle|sector|hz|Hz)$")
_BASE = {"s": "second", "Hz": "hz"}

# Roofline inputs, named as ncu's SpeedOfLight_RooflineChart section collects them: the work
# done per elapsed cycle summed over the SM sub-partitions (smsp__; sm__ in older layouts), the
# peak per cycle of the whole device (sm__), the clock, and DRAM's bytes.
CYCLES_PER_S = ("sm__cycles_elapsed.avg.per_second", "smsp__cycles_elapsed.avg.per_second")
DRAM_BYTES_PER_S = "dram__bytes.sum.per_second"
DRAM_PEAK = ("dram__bytes.sum.peak_sustained", "dram__cycles_elapsed.avg.per_second")
PRECISIONS = {"fp64": "d", "fp32": "f", "fp16": "h"}
# FLOP per thread instruction: add, mul, fma. A half-precision instruction works on a pair
# (HADD2/HMUL2/HFMA2), so it counts twice (ncu's own derived metrics say _x2 and _x4).
FLOP_PER_INST = {"d": (1, 1, 2), "f": (1, 1, 2), "h": (2, 2, 4)}
_ACHIEVED = "{unit}__sass_thread_inst_executed_op_{p}{op}_pred_on.sum.per_cycle_elapsed"
_PEAK = "sm__sass_thread_inst_executed_op_{p}fma_pred_on.sum.peak_sustained"
# Tensor-core work (the hierarchical tensor roofline of --set roofline and full): operations per
# second by instruction and input type, each with its peak; "sparsity_on" is 2:4-sparse work.
_TENSOR = re.compile(
    r"^sm__ops_path_tensor_op_(?P<op>[a-z]+)_src_(?P<src>[a-z0-9]+)(?:_dst_[a-z0-9]+)?"
    r"(?:_sparsity_(?P<sparsity>on|off))?\.sum\.per_second$"
)
_TENSOR_PEAK = (".sum.per_second", ".sum.peak_sustained_elapsed.per_second")


def unit_scale(unit: str) -> tuple[float, str]:
    """The factor and unit that put a value in the kit's units (ns; per second; bytes).

    >>> unit_scale("Gbyte/second"), unit_scale("usecond"), unit_scale("cycle/nsecond")
    ((1000000000.0, 'byte/second'), (1000.0, 'nsecond'), (1000000000.0, 'cycle/second'))
    >>> unit_scale("Gbyte/s"), unit_scale("us"), unit_scale("Ghz"), unit_scale("%")
    ((1000000000.0, 'byte/second'), (1000.0, 'nsecond'), (1000000000.0, 'cycle/second'), (1.0, '%'))
    """
    top, _, bottom = (unit or "").partition("/")
    m_top, m_bottom = _UNIT.match(top), _UNIT.match(bottom) if bottom else None
    if not m_top or (bottom and not m_bottom):
        return 1.0, unit
    factor = _PREFIX[m_top["prefix"]]
    base = _BASE.get(m_top["base"], m_top["base"])
    per = _BASE.get(m_bottom["base"], m_bottom["base"]) if m_bottom else ""
    if "hz" in (base, per):  # a clock: cycles per second (nothing is "per hertz")
        return (factor, "cycle/second") if not bottom else (1.0, unit)
    if not bottom:
        if base == "second":  # a duration: in ns
            return factor * 1e9, "nsecond"
        return factor, base
    return factor * _PER[m_bottom["prefix"]], f"{base}/{per}"


def _number(text: str) -> float:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return float("nan")


def _rows(text: str, where: str, required: tuple[str, ...]) -> tuple[list[str], list[list[str]]]:
    lines = [line for line in text.splitlines() if line.startswith('"')]  # skip ==PROF== lines
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    header = rows[0] if rows else []
    missing = [name for name in required if name not in header]
    if missing:
        raise TraceFormatError(
            f"{where} is not an ncu CSV export the kit knows: expected columns {list(required)}, "
            f"found {header}; export with 'ncu --csv --page {'details' if 'Metric Name' in required else 'raw'} "
            "--import REPORT.ncu-rep'"
        )
    return header, rows[1:]


def _details_page(text: str, where: str) -> pd.DataFrame:
    """The details page as text cells, ncu's own column names."""
    import pandas as pd

    header, body = _rows(text, where, ("ID", "Kernel Name", *DETAILS))
    return pd.DataFrame([dict(zip(header, row, strict=False)) for row in body], columns=header)


def read_ncu_details(text: str, where: str = "ncu --page details CSV") -> pd.DataFrame:
    """``ncu --csv --page details``: one row per (launch, section, metric), value numeric."""
    table = _details_page(text, where)
    header = list(table.columns)
    names = {h: IDENTITY.get(h, DETAILS.get(h)) for h in header}
    table = table[table["Metric Name"] != ""]  # rule rows: read_ncu_rules
    table = table[[h for h in header if names[h]]].rename(columns=names).reset_index(drop=True)
    scaled = [unit_scale(u) for u in table["unit"]]
    table["value"] = [_number(v) * f for v, (f, _) in zip(table["value"], scaled, strict=True)]
    table["unit"] = [u for _, u in scaled]
    table["id"] = table["id"].astype("int64")
    return table


def read_ncu_rules(text: str, where: str = "ncu --page details CSV") -> pd.DataFrame:
    """ncu's advice in a ``--page details`` export: one row per launch and rule that fired
    (``type`` OPT: an optimization, INF: information, WRN: a warning), with the speedup ncu
    estimates in percent (``speedup_scope`` local: of the rule's own unit; global: of the
    kernel), largest first. An export with no rule columns gives an empty table.
    """
    import pandas as pd

    table = _details_page(text, where)
    columns = ["id", "name", *RULES.values()]
    if "Rule Name" not in table.columns:
        return pd.DataFrame(columns=columns)
    table = table[(table["Rule Name"] != "") & (table["Metric Name"] == "")]
    table = table.rename(columns={**IDENTITY, **RULES}).reindex(columns=columns).fillna("")
    table["id"] = table["id"].astype("int64")
    table["speedup_pct"] = [_number(v) if v else float("nan") for v in table["speedup_pct"]]
    return table.sort_values(["speedup_pct", "id"], ascending=[False, True], na_position="last",
                             ignore_index=True)  # fmt: skip


def read_ncu_raw(text: str, where: str = "ncu --page raw CSV") -> pd.DataFrame:
    """``ncu --csv --page raw``: one row per profiled launch, one numeric column per metric.

    The second CSV row holds each metric's unit; the units after scaling are in
    ``table.attrs["units"]``.
    """
    import pandas as pd

    header, body = _rows(text, where, ("ID", "Kernel Name"))
    units_row, body = (body[0], body[1:]) if body and not body[0][0] else ([""] * len(header), body)
    data: dict[str, list] = {}
    units: dict[str, str] = {}
    for i, column in enumerate(header):
        cells = [row[i] if i < len(row) else "" for row in body]
        if column in IDENTITY:
            data[IDENTITY[column]] = cells
            continue
        factor, units[column] = unit_scale(units_row[i] if i < len(units_row) else "")
        data[column] = [_number(c) * factor for c in cells]
    table = pd.DataFrame(data)
    table["id"] = table["id"].astype("int64")
    table.attrs["units"] = units
    return table


def _first(raw: pd.DataFrame, names: tuple[str, ...]) -> str | None:
    return next((n for n in names if n in raw.columns), None)


def _tensor_work(raw: pd.DataFrame) -> list[tuple[str, pd.Series, pd.Series]]:
    """Tensor-core (label, FLOP/s, peak FLOP/s), one per input type (and sparsity): the
    operations of every instruction kind summed, under the highest of their peaks."""
    groups: dict[str, list[str]] = {}
    for column in raw.columns:
        m = _TENSOR.match(column)
        if m and column.replace(*_TENSOR_PEAK) in raw.columns:
            label = f"tensor {m['src']}" + (" sparse" if m["sparsity"] == "on" else "")
            groups.setdefault(label, []).append(column)
    return [
        (
            label,
            raw[columns].sum(axis=1),
            raw[[c.replace(*_TENSOR_PEAK) for c in columns]].max(axis=1),
        )
        for label, columns in sorted(groups.items())
    ]


def _pipe_work(raw: pd.DataFrame) -> list[tuple[str, pd.Series, pd.Series | float]]:
    """FP-pipe (precision, FLOP/s, peak FLOP/s) from the thread instructions per cycle."""
    cycles = _first(raw, CYCLES_PER_S)
    work = []
    for precision, p in PRECISIONS.items():
        ops = [
            _first(raw, tuple(_ACHIEVED.format(unit=u, p=p, op=op) for u in ("smsp", "sm")))
            for op in ("add", "mul", "fma")
        ]
        if None in ops or cycles is None:
            continue
        k_add, k_mul, k_fma = FLOP_PER_INST[p]
        flops = (k_add * raw[ops[0]] + k_mul * raw[ops[1]] + k_fma * raw[ops[2]]) * raw[cycles]
        peak_fma = _PEAK.format(p=p)
        peak = k_fma * raw[peak_fma] * raw[cycles] if peak_fma in raw.columns else float("nan")
        work.append((precision, flops, peak))
    return work


def roofline_table(raw: pd.DataFrame) -> pd.DataFrame:
    """Achieved FLOP/s, DRAM bytes/s and arithmetic intensity per launch and precision, with the
    device's peaks, from a raw export collected with ``--set roofline`` (or ``detailed``, ``full``).

    FLOP per cycle = add + mul + 2 x fma thread instructions (twice that in half precision,
    where one instruction works on a pair), times SM cycles per second; peak FLOP/s = the fma
    peak per cycle x its FLOP x SM cycles per second; peak bandwidth = DRAM bytes per cycle peak
    x DRAM cycles per second. Tensor-core work (a bf16 GEMM on the matrix units) is not in those
    counts: it has its own rows, ``tensor bf16`` and the like, from the tensor roofline's
    operations per second and their peak (``--set roofline`` or ``full``).
    """
    import pandas as pd

    rows = []
    if DRAM_BYTES_PER_S in raw.columns:
        bw_peak = (
            raw[DRAM_PEAK[0]] * raw[DRAM_PEAK[1]]
            if all(m in raw.columns for m in DRAM_PEAK)
            else float("nan")
        )
        for precision, flops, peak in [*_pipe_work(raw), *_tensor_work(raw)]:
            part = pd.DataFrame({
                "id": raw["id"], "name": raw["name"], "precision": precision,
                "flop_per_s": flops, "dram_bytes_per_s": raw[DRAM_BYTES_PER_S],
                "peak_flop_per_s": peak, "peak_bytes_per_s": bw_peak,
            })  # fmt: skip
            part["intensity"] = part["flop_per_s"] / part["dram_bytes_per_s"]
            rows.append(part[part["flop_per_s"] > 0])
    if not rows:
        expected = [_ACHIEVED.format(unit="smsp", p="f", op=op) for op in ("add", "mul", "fma")]
        raise TraceFormatError(
            "this ncu export has no roofline metrics: expected "
            f"{[*expected, CYCLES_PER_S[0], DRAM_BYTES_PER_S]} (for fp32; 'd'/'h' for fp64/fp16), "
            f"found {sorted(c for c in raw.columns if '__' in c)}; collect with "
            "'ncu --set roofline' (or detailed, full) and export with --page raw"
        )
    return pd.concat(rows, ignore_index=True).sort_values(["id", "precision"], ignore_index=True)
