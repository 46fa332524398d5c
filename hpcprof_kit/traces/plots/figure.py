"""What every picture of the kit returns: ``Plot(fig, table)``, a figure and the numbers behind
it, plus the colours the pictures share and a figure without pyplot state.
"""

from __future__ import annotations

import base64
import io
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

COLORS = {
    "cpu": "#4c72b0",
    "runtime": "#8172b2",
    "comm": "#c44e52",
    "gpu": "#55a868",
    "memcpy": "#dd8452",
    "memset": "#ccb974",
    "gpu_annotation": "#937860",
    "compute": "#55a868",
    "hidden_comm": "#e6a3a5",
    "exposed_comm": "#c44e52",
    "memory": "#dd8452",
    "host": "#4c72b0",
    "idle": "#dddddd",
}

# The breakdown's legend says the rule (breakdown.step_breakdown) part by part.
PART_LABELS = {
    "compute": "compute (no comm meanwhile)",
    "hidden_comm": "hidden comm (under compute)",
    "exposed_comm": "exposed comm (no compute)",
    "memory": "memory copies/sets",
    "host": "host only (device idle)",
    "idle": "idle",
}


class Plot(NamedTuple):
    """A figure and the numbers behind it."""

    fig: Any
    table: pd.DataFrame

    @property
    def bars(self) -> pd.DataFrame | None:
        """The timeline's bars, one row per bar drawn (other plots have none)."""
        return self.table.attrs.get("bars")

    def save(self, path: str, dpi: int = 100) -> str:
        """Write the figure (PNG, SVG or PDF by the file's suffix) and return the path."""
        self.fig.savefig(path, dpi=dpi)
        return str(path)

    def _repr_html_(self) -> str:
        buf = io.BytesIO()
        self.fig.savefig(buf, format="png", dpi=80)
        img = base64.b64encode(buf.getvalue()).decode("ascii")
        return f'<img src="data:image/png;base64,{img}"/>' + self.table.to_html(max_rows=20)


MAX_WIDTH_IN, MAX_HEIGHT_IN = 16.0, 24.0  # a figure sized by its data stops growing here


def new_figure(width: float, height: float):
    """A plain matplotlib Figure (no pyplot state: it renders headless and is freed with it).

    Sizes that grow with the data (steps, ranks, groups) are capped at ``MAX_WIDTH_IN`` x
    ``MAX_HEIGHT_IN`` inches: 500 steps make a dense heatmap, not an image 300 inches wide.
    """
    from matplotlib.figure import Figure

    size = (min(width, MAX_WIDTH_IN), min(height, MAX_HEIGHT_IN))
    return Figure(figsize=size, layout="constrained")
