"""The Dynolog recipe: per-node daemons and ``dyno gputrace`` for a PBS or Slurm job.

Dynolog is Meta's on-demand tracing daemon (not installable here). The recipe is text to paste
into a job script and a shell on the job's first node.

>>> print(dynolog_recipe("pbs", nodes=2, ranks_per_node=12, iterations=5).splitlines()[2])
mpiexec -n 2 --ppn 1 dynolog --enable_ipc_monitor &
"""

from __future__ import annotations

from hpcprof_kit.errors import SpecError

# How each scheduler starts one process per node, and how to list the job's hosts.
ONE_PER_NODE = {
    "pbs": "mpiexec -n {nodes} --ppn 1",
    "slurm": "srun --nodes={nodes} --ntasks-per-node=1 --overlap",
}
HOST_LIST = {
    "pbs": 'sort -u "$PBS_NODEFILE"',
    "slurm": 'scontrol show hostnames "$SLURM_JOB_NODELIST"',
}
DYNO_DEFAULT_PROCESS_LIMIT = 3  # dyno's own default: too few for 4 or 12 ranks per node


def dynolog_recipe(
    scheduler: str,
    nodes: int,
    ranks_per_node: int,
    iterations: int = 5,
    log_file: str = "$HPCPROF_RUN_DIR/traces/dynolog/trace.json",
) -> str:
    """Lines to start one daemon per node, run the ranks with the daemon, and trigger every node."""
    if scheduler not in ONE_PER_NODE:
        raise SpecError(
            f"scheduler {scheduler!r} has no dynolog recipe (known: {', '.join(ONE_PER_NODE)}); "
            "use 'pbs' or 'slurm'"
        )
    for name, value in (
        ("nodes", nodes),
        ("ranks_per_node", ranks_per_node),
        ("iterations", iterations),
    ):
        if not isinstance(value, int) or value < 1:
            raise SpecError(f"{name}={value!r} must be a whole number >= 1")
    limit = max(ranks_per_node, DYNO_DEFAULT_PROCESS_LIMIT)
    start = ONE_PER_NODE[scheduler].format(nodes=nodes)
    return "\n".join([
        "# 1. In the job script, before the ranks start: one dynolog daemon per node.",
        f"mkdir -p \"$(dirname \"{log_file}\")\"",
        f"{start} dynolog --enable_ipc_monitor &",
        "# 2. Every rank registers with its node's daemon.",
        "export KINETO_USE_DAEMON=1",
        "export KINETO_DAEMON_INIT_DELAY_S=3  # older torch only; harmless on newer",
        "# 3. While the job trains, from a shell inside the job: trace every node.",
        f"for host in $({HOST_LIST[scheduler]}); do",
        f"    dyno --hostname \"$host\" gputrace --log-file \"{log_file}\" "
        f"--iterations {iterations} --process-limit {limit}",
        "done",
        f"# Each rank writes <log-file stem>_<pid>.json; --process-limit {limit} >= {ranks_per_node} ranks per node.",
        "",
    ])  # fmt: skip
