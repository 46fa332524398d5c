"""``hpcprof-kit port FILE``: rewrite CUDA-specific PyTorch code for XPU (or any device)."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("port", help="show (and apply) the CUDA->XPU changes to a Python file")
    p.add_argument("file", help="the Python file to port")
    p.add_argument("--to", choices=("xpu", "agnostic"), default="xpu", help="target (default xpu)")
    p.add_argument(
        "--ipex", action="store_true", help="add the optional IPEX import/optimize lines"
    )
    p.add_argument(
        "--torch",
        metavar="VERSION",
        help="the target's torch release (default: the oldest the --system record names, "
        "else the oldest the kit supports); names it lacks get another spelling or are listed",
    )
    p.add_argument("--system", help="the site the code will run on (its record's oldest torch)")
    p.add_argument("--write", action="store_true", help="rewrite FILE, keeping FILE.orig")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from hpcprof_kit.porting import port_file

    result = port_file(
        args.file,
        args.to,
        write=args.write,
        ipex=args.ipex,
        torch_version=args.torch,
        system=args.system,
    )
    sys.stdout.write(result.diff())
    print(result.report(), file=sys.stderr)
    if args.write and result.code != result.original:
        print(f"wrote {args.file} (original kept as {args.file}.orig)", file=sys.stderr)
    return 0
