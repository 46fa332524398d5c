"""What each drawing cell shows, checked in nbval's run of the notebooks from the kernel's outputs.

A figure reaches JupyterLab as a mime bundle the kernel sends: ``image/png`` (a matplotlib
figure) or ``text/html`` holding the PNG inline (a ``Plot``'s ``_repr_html_``). nbval's run of a
notebook receives those bundles, so for every cell that tests/browser/notebooks.py declares, this
plugin (loaded by notebooks/conftest.py) counts the widgets the kernel showed and the images
each way, every image decoded as a PNG with a width and a height, against the table. An image
drawn inside a widget, and the widget itself, exist only in the front end: the notebooks that
show a widget also run in JupyterLab and Chromium (tests/test_browser.py), which see the page.
"""

from __future__ import annotations

import base64
import binascii
import re
import struct
from pathlib import Path

import pytest
from browser.notebooks import NOTEBOOKS, expected_of

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
INLINE_PNG = re.compile(r'<img src="data:image/png;base64,([A-Za-z0-9+/=]+)"')
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(data: str) -> tuple[int, int] | None:
    """Width and height of a base64 PNG (from its IHDR chunk), or None when it is not one.

    >>> png_size("iVBORw0KGgoAAAANSUhEUgAAAAIAAAADCAIAAAA2iEnWAAAAC0lEQVR4nGNgwAIAABUAAapll8QAAAAASUVORK5CYII=")
    (2, 3)
    >>> png_size("bm90IGFuIGltYWdl") is None
    True
    """
    try:
        raw = base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        return None
    if len(raw) < 24 or not raw.startswith(PNG_SIGNATURE) or raw[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", raw[16:24])
    return (width, height) if width and height else None


def shown(outputs: list[dict]) -> dict[str, int]:
    """Widgets and decodable images in a cell's outputs, by the way each lands ("png", "html")."""
    found = {"widgets": 0, "png": 0, "html": 0, "broken": 0}
    for out in outputs:
        data = out.get("data") or {}
        if WIDGET_VIEW in data:
            found["widgets"] += 1
            continue  # a widget's text/plain fallback is not a picture
        if "image/png" in data:
            found["png" if png_size(data["image/png"]) else "broken"] += 1
        for inline in INLINE_PNG.findall(data.get("text/html", "")):
            found["html" if png_size(inline) else "broken"] += 1
    return found


def declared(stem: str, source: str) -> dict[str, int]:
    """What the table says the cell ``source`` of notebook ``stem`` shows, in :func:`shown`'s
    terms (an image inside a widget is the browser's to see, not counted here)."""
    want = expected_of(stem, [source])
    return {"widgets": want.widgets, "png": want.images["png"], "html": want.images["html"],
            "broken": 0}  # fmt: skip


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    result = yield
    if type(item).__name__ != "IPyNbCell" or item.test_outputs is None:
        return result
    stem = Path(str(item.parent.path)).stem
    source = item.cell.source
    if stem in NOTEBOOKS and any(s.snippet in source for s in NOTEBOOKS[stem]):
        want, got = declared(stem, source), shown(item.test_outputs)
        if got != want:
            pytest.fail(
                f"{stem}.ipynb: the cell {source.splitlines()[0]!r} showed {got}, the table in "
                f"tests/browser/notebooks.py says {want} (a broken image is one that does not "
                "decode as a PNG)",
                pytrace=False,
            )
    return result
