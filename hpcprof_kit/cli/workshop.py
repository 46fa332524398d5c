"""``hpcprof-kit workshop init | show``: the class's settings in one file (workshop.toml).

>>> from hpcprof_kit.cli import main
>>> main(["workshop", "show"])  # doctest: +ELLIPSIS
no workshop file ...
0
"""

from __future__ import annotations

import argparse
from pathlib import Path


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


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("workshop", help="the class's settings file (workshop.toml)")
    inner = p.add_subparsers(dest="workshop_command", metavar="ACTION")
    q = inner.add_parser("init", help="write workshop.toml for a class")
    q.add_argument("--system", required=True, help="aurora, polaris, slurm or local")
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
    q.add_argument("-o", "--output", default="workshop.toml", type=Path)
    q.add_argument("--force", action="store_true", help="replace an existing file")
    q.set_defaults(func=cmd_init)
    s = inner.add_parser("show", help="print the workshop file in effect")
    s.set_defaults(func=cmd_show)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])
