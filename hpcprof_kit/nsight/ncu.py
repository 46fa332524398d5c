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
_UNIT = re.compile(r"^(?P<prefix>[KkMGTnum]?)(?P<base>byte|second|cycle)$")

# Roofline inputs (the metrics ncu's SpeedOfLight_RooflineChart section collects).
CYCLES_PER_S = "sm__cycles_elapsed.avg.per_second"
DRAM_BYTES_PER_S = "dram__bytes.sum.per_second"
DRAM_PEAK = ("dram__bytes.sum.peak_sustained", "dram__cycles_elapsed.avg.per_second")
PRECISIONS = {"fp64": "d", "fp32": "f", "fp16": "h"}
_OP = "sm__sass_thread_inst_executed_op_{p}{op}_pred_on.sum.{what}"


def unit_scale(unit: str) -> tuple[float, str]:
    """The factor and unit that put a value in the kit's units (ns; per second; bytes).

    >>> unit_scale("Gbyte/second"), unit_scale("usecond"), unit_scale("cycle/nsecond")
    ((1000000000.0, 'byte/second'), (1000.0, 'nsecond'), (1000000000.0, 'cycle/second'))
    """
    top, _, bottom = (unit or "").partition("/")
    m_top, m_bottom = _UNIT.match(top), _UNIT.match(bottom) if bottom else None
    if not m_top or (bottom and not m_bottom):
        return 1.0, unit
    factor = _PREFIX[m_top["prefix"]]
    if not bottom:
        if m_top["base"] == "second":  # a duration: in ns
            return factor * 1e9, "nsecond"
        return factor, m_top["base"]
    return factor * _PER[m_bottom["prefix"]], f"{m_top['base']}/{m_bottom['base']}"


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


def read_ncu_details(text: str, where: str = "ncu --page details CSV") -> pd.DataFrame:
    """``ncu --csv --page details``: one row per (launch, section, metric), value numeric."""
    import pandas as pd

    header, body = _rows(text, where, ("ID", "Kernel Name", *DETAILS))
    names = {h: IDENTITY.get(h, DETAILS.get(h)) for h in header}
    table = pd.DataFrame([dict(zip(header, row, strict=False)) for row in body], columns=header)
    table = table[[h for h in header if names[h]]].rename(columns=names)
    scaled = [unit_scale(u) for u in table["unit"]]
    table["value"] = [_number(v) * f for v, (f, _) in zip(table["value"], scaled, strict=True)]
    table["unit"] = [u for _, u in scaled]
    table["id"] = table["id"].astype("int64")
    return table


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


def roofline_table(raw: pd.DataFrame) -> pd.DataFrame:
    """Achieved FLOP/s, DRAM bytes/s and arithmetic intensity per launch and precision, with the
    device's peaks, from a raw export collected with ``--set roofline`` (or ``full``).

    FLOP per cycle = add + mul + 2 x fma (thread instructions), times SM cycles per second;
    peak FLOP/s = 2 x fma peak per cycle x SM cycles per second; peak bandwidth = DRAM bytes
    per cycle peak x DRAM cycles per second.
    """
    import pandas as pd

    rows = []
    for precision, p in PRECISIONS.items():
        ops = [_OP.format(p=p, op=op, what="per_cycle_elapsed") for op in ("add", "mul", "fma")]
        if not all(m in raw.columns for m in ops) or CYCLES_PER_S not in raw.columns:
            continue
        if DRAM_BYTES_PER_S not in raw.columns:
            continue
        flop_per_cycle = raw[ops[0]] + raw[ops[1]] + 2 * raw[ops[2]]
        flops = flop_per_cycle * raw[CYCLES_PER_S]
        peak_fma = _OP.format(p=p, op="fma", what="peak_sustained")
        peak = 2 * raw[peak_fma] * raw[CYCLES_PER_S] if peak_fma in raw.columns else float("nan")
        bw_peak = (
            raw[DRAM_PEAK[0]] * raw[DRAM_PEAK[1]]
            if all(m in raw.columns for m in DRAM_PEAK)
            else float("nan")
        )
        part = pd.DataFrame({
            "id": raw["id"], "name": raw["name"], "precision": precision,
            "flop_per_s": flops, "dram_bytes_per_s": raw[DRAM_BYTES_PER_S],
            "peak_flop_per_s": peak, "peak_bytes_per_s": bw_peak,
        })  # fmt: skip
        part["intensity"] = part["flop_per_s"] / part["dram_bytes_per_s"]
        rows.append(part[part["flop_per_s"] > 0])
    if not rows:
        expected = [
            _OP.format(p="f", op=op, what="per_cycle_elapsed") for op in ("add", "mul", "fma")
        ]
        raise TraceFormatError(
            "this ncu export has no roofline metrics: expected "
            f"{[*expected, CYCLES_PER_S, DRAM_BYTES_PER_S]} (for fp32; 'd'/'h' for fp64/fp16), "
            f"found {sorted(c for c in raw.columns if '__' in c)}; collect with "
            "'ncu --set roofline' (or full) and export with --page raw"
        )
    return pd.concat(rows, ignore_index=True).sort_values(["id", "precision"], ignore_index=True)
