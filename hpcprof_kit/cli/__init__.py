"""The ``hpcprof-kit`` command.

Each module in this package that defines ``register(subparsers)`` adds its own subcommands and
sets ``func`` on them; ``func(args)`` returns the exit code. Modules import heavy libraries
(torch, pandas, matplotlib) only inside their functions, so ``hpcprof-kit --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from hpcprof_kit import __version__
from hpcprof_kit.errors import KitError


def system_help(default: str | None = None) -> str:
    """The help of a ``--system`` flag: the records found now (the kit's and
    ``$HPCPROF_SYSTEMS_DIR``), so a new site's data file shows up without a code change."""
    from hpcprof_kit.systems import system_names

    names = system_names()
    listed = ", ".join(names[:-1]) + f" or {names[-1]}" if len(names) > 1 else "".join(names)
    return f"{listed} (a system record){f'; default {default}' if default else ''}"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="hpcprof-kit",
        description="Profile PyTorch training on HPC nodes: devices, jobs, traces, bindings.",
    )
    parser.add_argument("--version", action="version", version=f"hpcprof-kit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except KitError as exc:
        print(f"hpcprof-kit {args.command}: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a file or folder the user named: one line, not a traceback
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"hpcprof-kit {args.command}: {exc.strerror or exc}{where}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
