"""``python -m hpcprof_kit.ondemand [--run-dir D] -- app.py args...`` (or ``-- -m module args...``).

Installs the on-demand trigger on every optimizer, then runs the app unchanged as ``__main__``.
"""

from __future__ import annotations

import argparse
import runpy
import sys

from hpcprof_kit.ondemand import install


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="python -m hpcprof_kit.ondemand",
        description="Run a training script so that 'hpcprof-kit trace RUN_DIR' can trace it.",
        usage="%(prog)s [--run-dir D] -- app.py args... | -- -m module args...",
    )
    parser.add_argument("--run-dir", default=None, help="default: $HPCPROF_RUN_DIR")
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    app = argv[split + 1 :]
    if not app or (app[0] == "-m" and len(app) < 2):
        parser.error("give the app after '--': -- app.py args... or -- -m module args...")
    install(run_dir=args.run_dir)
    if app[0] == "-m":
        sys.argv = [app[1], *app[2:]]
        runpy.run_module(app[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = app
        runpy.run_path(app[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
