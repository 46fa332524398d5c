"""``hpcprof-kit devices``: which accelerator is here, how many, and their properties."""

from __future__ import annotations

import argparse
import json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("devices", help="the device type, count and properties of this node")
    p.add_argument("--json", action="store_true", help='{"device_type", "count", "devices": [...]}')
    p.add_argument("--device", default=None, help="xpu, cuda, mps or cpu (default: detect)")
    p.set_defaults(func=_run)


def summary(device: str | None = None) -> dict:
    """The JSON the command prints.

    >>> summary("cpu")["device_type"], summary("cpu")["count"]
    ('cpu', 1)
    """
    from hpcprof_kit import device as devmod

    kind = devmod.detect(device)
    return {
        "device_type": kind,
        "count": devmod.device_count(kind),
        "devices": devmod.properties(kind),
    }


def _run(args: argparse.Namespace) -> int:
    from hpcprof_kit import device as devmod

    info = summary(args.device)
    if args.json:
        print(json.dumps(info, indent=1))
        return 0
    print(f"device type: {info['device_type']}  count: {info['count']}")
    for row in info["devices"]:
        print("  " + "  ".join(f"{k}={v}" for k, v in row.items()))
    topo = devmod.topology(info["device_type"])
    if topo:
        print(topo)
    return 0
