"""The job spec as command-line options, shared by ``render``, ``submit``, ``sweep`` and
``rehearse``: the flags, the spec they make, and the kit's warnings as one line each."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

from hpcprof_kit.cli import system_help
from hpcprof_kit.errors import KitWarning, SpecError

# submit --wait's exit status when the scheduler says the job can never run as asked.
NEVER_RUNS_EXIT = 3

# JobSpec fields the flags set; a flag not given leaves the field alone (its default, or --spec's).
SPEC_FLAGS = ("system", "example", "nodes", "ranks_per_node", "walltime", "queue", "account",
              "name", "profile", "tracer", "profrank", "rankcutoff", "filesystems", "binding",
              "tracer_set", "tracer_args", "trace_all", "capture_steps")  # fmt: skip


def _spec_options(p: argparse.ArgumentParser) -> None:
    unset = argparse.SUPPRESS  # absent from args unless given: --spec's values stay
    p.add_argument("--spec", metavar="FILE", help="start from a spec.json (or a run directory's)")
    p.add_argument("--system", default=unset, help=system_help("local"))
    p.add_argument(
        "--example", default=unset, help="train (default), seqpar, affinity, pathologies or analyze"
    )
    p.add_argument("--nodes", type=int, default=unset, help="default 1")
    p.add_argument("--ranks-per-node", type=int, default=unset, help="default 2")
    p.add_argument("--walltime", default=unset, help="HH:MM:SS (default 00:10:00)")
    p.add_argument("--queue", default=unset)
    p.add_argument("--account", default=unset)
    p.add_argument("--name", default=unset, help="job name; names your own command's run too")
    p.add_argument(
        "--profile", action="store_true", default=unset, help="run the example under torch.profiler"
    )
    p.add_argument("--tracer", default=unset, help="vendor tracer: unitrace, nsys or ncu")
    p.add_argument(
        "--profrank", type=int, default=unset, help="local rank the tracer traces on each node"
    )
    p.add_argument(
        "--rankcutoff",
        type=int,
        default=unset,
        help="trace only global ranks below this (default: no cutoff)",
    )
    p.add_argument(
        "--tracer-set", default=unset, help="the tracer's flag set: unitrace/nsys standard "
        "(default), minimal or full, nsys also host; ncu detailed (default), basic, roofline, full",
    )  # fmt: skip
    p.add_argument(
        "--tracer-arg", dest="tracer_args", action="append", default=unset, metavar="FLAG",
        help="one more tracer flag (repeat it), e.g. --tracer-arg=--trace=cuda,nvtx,mpi",
    )  # fmt: skip
    p.add_argument(
        "--trace-all", action="store_true", default=unset,
        help="trace every rank (nsys without a rank filter, as ALCF's sequence-parallel hands-on)",
    )  # fmt: skip
    p.add_argument(
        "--capture-steps", default=unset, metavar="A-B",
        help="record only steps A..B: nsys/ncu capture range, unitrace conditional "
        "collection, or (no tracer) a torch.profiler trace of those steps",
    )  # fmt: skip
    p.add_argument(
        "--filesystems", default=unset, help="':'-separated file systems (default: the system's)"
    )
    p.add_argument("--binding", default=unset, help="binding preset (default: the system's)")
    p.add_argument(
        "app_command",
        nargs="*",
        metavar="-- CMD ARGS",
        help="your own program and its arguments, after '--' (e.g. -- python mlp.py --lr 0.1); "
        "words that start with '-' are extra arguments for the example instead",
    )


def _spec(args: argparse.Namespace):
    from hpcprof_kit.jobs import JobSpec

    given = {key: getattr(args, key) for key in SPEC_FLAGS if hasattr(args, key)}
    words = list(getattr(args, "app_command", None) or ())
    if words and (words[0].startswith("-") or "example" in given):
        given["args"] = words  # -- --epochs 2, or --example analyze -- DIR: the example's
    elif words:
        given["command"] = words
    path = getattr(args, "spec", None)
    if not path:
        return JobSpec.for_workshop(**given)
    return _spec_file(path).with_(**given)


def _spec_file(path: str):
    """The JobSpec in a spec.json file, or in a run directory's."""
    from hpcprof_kit.jobs import JobSpec

    target = Path(path) / "spec.json" if Path(path).is_dir() else Path(path)
    try:
        text = target.read_text()
    except OSError as exc:
        raise SpecError(
            f"--spec {path}: cannot read {target} ({exc.strerror}); pass a spec.json file or "
            "a run directory holding one"
        ) from None
    try:
        return JobSpec.from_json(text)
    except json.JSONDecodeError as exc:
        raise SpecError(f"--spec {path}: {target} is not JSON ({exc}); pass a spec.json") from None


@contextlib.contextmanager
def _warnings_as_lines(command: str) -> Iterator[None]:
    """The kit's warnings as one line each on stderr (``hpcprof-kit render: warning: ...``)."""
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", KitWarning)  # other warnings keep their filters
            yield
    finally:
        seen = set()
        for w in caught:
            text = str(w.message)
            if not issubclass(w.category, KitWarning):
                warnings.showwarning(w.message, w.category, w.filename, w.lineno)
            elif text not in seen:  # a spec validated twice warns twice
                seen.add(text)
                print(f"hpcprof-kit {command}: warning: {text}", file=sys.stderr)
