"""Where to click in Nsight Systems and Nsight Compute, and what to look for: the views the
guides teach, as data (``gui_guide.toml`` beside this module), each row citing its guide.

>>> guide = nsight_gui_guide()
>>> bool(guide.loc[guide["tool"] == "Nsight Compute", "where_to_click"]
...      .str.contains("Speed of Light").all())
True
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

GUIDE_FILE = Path(__file__).with_name("gui_guide.toml")
GUIDE_COLUMNS = ("report", "tool", "where_to_click", "what_to_look_for", "guide", "section")


def guides() -> dict[str, str]:
    """The guides the rows cite: public address -> title."""
    return dict(tomllib.loads(GUIDE_FILE.read_text())["guides"])


def nsight_gui_guide() -> Any:
    """One row per view: ``report``, ``tool``, ``where_to_click``, ``what_to_look_for``, and
    the guide it comes from (``guide``, its public address; ``section``, the heading path), as a
    DataFrame."""
    import pandas as pd

    views = tomllib.loads(GUIDE_FILE.read_text())["view"]
    return pd.DataFrame([[v[c] for c in GUIDE_COLUMNS] for v in views], columns=list(GUIDE_COLUMNS))
