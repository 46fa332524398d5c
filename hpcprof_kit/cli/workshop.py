"""``hpcprof-kit workshop init | show | record-pack``: the class's settings in one file (workshop.toml).

>>> from hpcprof_kit.cli import main
>>> main(["workshop", "show"])  # doctest: +ELLIPSIS
no workshop file ...
0
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hpcprof_kit.cli import system_help


def cmd_init(args: argparse.Namespace) -> int:
    from hpcprof_kit import workshop
    from hpcprof_kit.systems import load_system

    record = load_system(args.system)
    site = record.scheduler != "none"
    proxy = workshop.alcf_proxy() if site and not args.no_proxy else {}
    ws = workshop.Workshop(
        system=record.name, project=args.project, queue=args.queue,
        reservation_nodes=args.reservation_nodes, reservation_walltime=args.reservation_walltime,
        filesystems=args.filesystems or record.default_filesystems or None, venv=args.venv,
        ranks_per_node=args.ranks_per_node or record.devices_per_node or None, proxy=proxy,
        pack=args.pack,
    )  # fmt: skip
    path = workshop.init(args.output, ws, force=args.force)
    print(f"wrote {path}:")
    print(path.read_text().rstrip())
    print(f"notebooks and JobSpec find it in {path.parent} (or set HPCPROF_WORKSHOP={path})")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from hpcprof_kit import workshop

    path = workshop.find_file()
    if path is None:
        print("no workshop file (laptop defaults); write one with 'hpcprof-kit workshop init'")
        return 0
    ws = workshop.load(path)
    print(f"{path}:")
    print(workshop.dumps(ws).rstrip())
    return 0


def cmd_record_pack(args: argparse.Namespace) -> int:
    from hpcprof_kit import workshop
    from hpcprof_kit.errors import SpecError
    from hpcprof_kit.pack import read_index, record_pack

    ws = workshop.current()
    pack = args.pack or ws.pack
    if not pack:
        raise SpecError(
            'no pack folder: pass --pack DIR, or name one in the workshop file (pack = "...")'
        )
    system = args.system or ws.system
    folder = record_pack(pack, system, backend=args.backend, only=tuple(args.only or ()))
    index = read_index(folder)
    for name, sweep in index["sweeps"].items():
        states = ", ".join(f"{r['label']}: {r['state']}" for r in sweep["runs"])
        print(f"{name}: {states}")
    print(f"pack in {folder} (README.md says what each run is)")
    failed = [r for s in index["sweeps"].values() for r in s["runs"] if r["state"] != "COMPLETED"]
    return 1 if failed else 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("workshop", help="the class's settings file (workshop.toml)")
    inner = p.add_subparsers(dest="workshop_command", metavar="ACTION")
    q = inner.add_parser("init", help="write workshop.toml for a class")
    q.add_argument("--system", required=True, help=system_help())
    q.add_argument("--project", help="the allocation jobs are charged to (-A)")
    q.add_argument("--queue", help="the reservation's queue (e.g. R123456) or a queue")
    q.add_argument("--reservation-nodes", type=int, help="nodes the reservation holds")
    q.add_argument("--reservation-walltime", help="the reservation's length, HH:MM:SS")
    q.add_argument("--filesystems", help="default: the system's (e.g. home:flare)")
    q.add_argument("--venv", help="the environment jobs activate (e.g. on the project filesystem)")
    q.add_argument("--ranks-per-node", type=int, help="default: one per GPU (tile)")
    q.add_argument(
        "--no-proxy",
        action="store_true",
        help="leave out ALCF's proxy variables (compute nodes need them for pip)",
    )
    q.add_argument("--pack", help="the reference pack folder (hpcprof-kit workshop record-pack)")
    q.add_argument("-o", "--output", default="workshop.toml", type=Path)
    q.add_argument("--force", action="store_true", help="replace an existing file")
    q.set_defaults(func=cmd_init)
    s = inner.add_parser("show", help="print the workshop file in effect")
    s.set_defaults(func=cmd_show)
    r = inner.add_parser(
        "record-pack",
        help="record the workshop's reference runs (the day before, on the site)",
        description="Run the reference sweeps (eager and compiled training, sequence parallel "
        "over dtypes and nodes, one vendor-tracer run) into the pack folder, for attendees "
        "whose own run is missing or failed. Run again, it runs only what did not complete.",
        epilog="Exit status: 0 when every run completed, 1 when some did not (named above).",
    )
    r.add_argument("--pack", help="the pack folder (default: the workshop file's pack)")
    r.add_argument("--system", help="default: the workshop file's system")
    r.add_argument("--backend", default="auto", help="auto (the system's scheduler), local ...")
    r.add_argument("--only", action="append", help="one reference sweep (train, seqpar, tracer)")
    r.set_defaults(func=cmd_record_pack)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])
