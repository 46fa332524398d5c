"""``python -m hpcprof_kit.validate`` is ``hpcprof-kit validate`` (e.g. ``--strip NOTEBOOK``)."""

import argparse
import sys

from hpcprof_kit.cli.validate import add_arguments, run


def main(argv: list[str] | None = None) -> int:
    parser = add_arguments(argparse.ArgumentParser(prog="python -m hpcprof_kit.validate"))
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
