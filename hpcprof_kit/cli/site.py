"""``hpcprof-kit site init``: write a site record from what the PBS or Slurm cluster says."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("site", help="a site record for any PBS or Slurm cluster")
    verbs = p.add_subparsers(dest="site_command", metavar="VERB", required=True)
    init = verbs.add_parser(
        "init",
        help="write a record from qstat/pbsnodes/qmgr or scontrol/sinfo (run on a login node)",
    )
    init.add_argument("--scheduler", required=True, choices=("pbs", "slurm"))
    init.add_argument(
        "--name", default=None, help="the record's name (default: the server's or cluster's)"
    )
    init.add_argument(
        "--out", default=None, help="folder to write NAME.toml into (default: $HPCPROF_SYSTEMS_DIR)"
    )
    init.set_defaults(func=_init)


def _init(args: argparse.Namespace) -> int:
    import re

    from hpcprof_kit.jobs.queues import run_query
    from hpcprof_kit.systems.site_init import nodes_text, read_cluster, records_folder, write_record

    folder = records_folder(args.out)  # before asking the cluster: a missing folder fails fast
    facts = read_cluster(args.scheduler, run_query)
    # A PBS server's name is a host name: its first label names the site.
    fallback = (facts.server.name or f"my{args.scheduler}").split(".")[0]
    name = args.name or re.sub(r"[^A-Za-z0-9_.-]", "-", fallback)
    path = write_record(facts, name, folder)
    print(f"wrote {path} ({len(facts.queues)} queues, {nodes_text(len(facts.nodes))})")
    print("edit the lines marked EDIT (modules, venv, launcher); then use it with")
    print(f"  HPCPROF_SYSTEMS_DIR={folder} hpcprof-kit submit --system {name} ...")
    return 0
