"""The Dynolog recipe: per-node daemons and ``dyno gputrace`` for a PBS or Slurm job.

Dynolog is Meta's on-demand tracing daemon (not installable here). The recipe is text to paste
into a job script and a shell on the job's first node. What it needs (Dynolog's own guide):

=================================  ==============================================================
dynolog                            ``dynolog --enable_ipc_monitor`` on every node (port 1778)
torch older than 2.0               not supported
torch 2.0 - 2.2                    ``KINETO_USE_DAEMON=1`` and ``KINETO_DAEMON_INIT_DELAY_S=3``
                                   (the delay avoids a library-loading race that segfaults)
torch 2.3 and newer                ``KINETO_USE_DAEMON=1`` only: with the delay set, init fails
                                   with "ERROR: External init callback must run in same thread
                                   as registerClient"
torch 2.3 - 2.6 on CUDA            may still answer "Failed to match processes"; torch 2.7 (or a
                                   nightly after 2025-02-17) fixes Kineto's init
=================================  ==============================================================

A rank that registered prints ``Registering daemon config loader`` (Kineto INFO line) in the
job's log: :func:`check_registration` reads it. ``dyno gputrace --iterations N`` traces N
optimizer steps (it takes precedence over ``--duration-ms``); without an optimizer step Kineto
falls back to a duration, so ``iterations=None`` triggers ``--duration-ms`` instead.

>>> print(dynolog_recipe("pbs", nodes=2, ranks_per_node=12, iterations=5).splitlines()[3])
mpiexec -n 2 --ppn 1 dynolog --enable_ipc_monitor &
>>> daemon_env("2.1.2")
{'KINETO_USE_DAEMON': '1', 'KINETO_DAEMON_INIT_DELAY_S': '3'}
>>> daemon_env("2.13.0+cpu")
{'KINETO_USE_DAEMON': '1'}
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from hpcprof_kit.errors import OnDemandError, SpecError

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
DYNO_DEFAULT_DURATION_MS = 500  # dyno's own default for a duration trace
TORCH_MIN = (2, 0)  # older torch: not supported by the on-demand flow
DELAY_BREAKS_FROM = (2, 3)  # KINETO_DAEMON_INIT_DELAY_S breaks init from here on
INIT_FIXED_IN = (2, 7)  # Kineto's cleaned-up init (pytorch#147195)
REGISTRATION_LINE = "Registering daemon config loader"
INIT_DELAY_ERROR = "External init callback must run in same thread as registerClient"
# Only Slurm job ids reach Kineto (it reads SLURM_JOB_ID); a PBS job id filters nothing.
JOB_ID_VAR = {"slurm": "$SLURM_JOB_ID"}


def torch_version(text: str) -> tuple[int, int]:
    """(major, minor) of a torch version string.

    >>> torch_version("2.7.0a0+git1234"), torch_version("2.13.0+cpu")
    ((2, 7), (2, 13))
    """
    from hpcprof_kit.systems import release

    found = release(text)
    if found is None:
        raise SpecError(f"torch version {text!r} is not like '2.5.1'; pass torch.__version__")
    return found


def daemon_env(version: str) -> dict[str, str]:
    """The environment a rank of this torch version needs to register with dynolog."""
    v = torch_version(version)
    if v < TORCH_MIN:
        raise SpecError(
            f"torch {version} is older than 2.0, which Dynolog's on-demand tracing does not "
            "support; use torch 2.7 or newer (or trace with the kit's own trigger, "
            "hpcprof-kit trace RUN_DIR)"
        )
    env = {"KINETO_USE_DAEMON": "1"}
    if v < DELAY_BREAKS_FROM:
        env["KINETO_DAEMON_INIT_DELAY_S"] = "3"
    return env


def _env_lines(version: str | None) -> list[str]:
    head = "# 2. Every rank registers with its node's daemon (torch >= 2.0; 2.7+ recommended)."
    why = [
        "# KINETO_DAEMON_INIT_DELAY_S only for torch < 2.3: on 2.3 and newer it breaks init",
        f'# ("ERROR: {INIT_DELAY_ERROR}").',
    ]
    if version is None:  # decided in the job, by the torch the ranks will import
        check = (
            "if python3 -c 'import sys, torch; "
            'sys.exit(tuple(map(int, torch.__version__.split(".")[:2])) >= (2, 3))\'; then'
        )
        return [head, "export KINETO_USE_DAEMON=1", *why, check,
                "    export KINETO_DAEMON_INIT_DELAY_S=3", "fi"]  # fmt: skip
    lines = [head, *(f"export {k}={v}" for k, v in daemon_env(version).items())]
    v = torch_version(version)
    if v < DELAY_BREAKS_FROM:
        lines.append(
            f"# torch {version} < 2.3: the delay avoids a library-loading race (segfault)."
        )
    if v >= DELAY_BREAKS_FROM:
        lines += [f"# torch {version}: KINETO_DAEMON_INIT_DELAY_S stays unset; on 2.3 and newer "
                  "it breaks init", why[1]]  # fmt: skip
    if DELAY_BREAKS_FROM <= v < INIT_FIXED_IN:
        lines.append(
            f"# torch {version} on CUDA may answer 'Failed to match processes': torch 2.7 "
            "(or a nightly after 2025-02-17) fixes Kineto's init."
        )
    return lines


def dyno_command(
    host: str,
    log_file: str,
    *,
    iterations: int | None = 5,
    duration_ms: int | None = None,
    process_limit: int = DYNO_DEFAULT_PROCESS_LIMIT,
    job_id: str | int | None = None,
    pids: Sequence[int] = (),
) -> list[str]:
    """One ``dyno gputrace`` request, as argv (values may be shell expansions such as
    ``"$host"``; :func:`dynolog_recipe` quotes them).

    >>> " ".join(dyno_command("$host", "t.json", iterations=None, pids=[11, 12]))
    'dyno --hostname $host gputrace --log-file t.json --duration-ms 500 --process-limit 3 --pids 11,12'
    """
    if iterations is not None and duration_ms is not None:
        raise SpecError(
            "dyno ignores --duration-ms when --iterations is given (iterations take "
            "precedence); pass iterations=N, or iterations=None with duration_ms=MS"
        )
    argv = ["dyno", "--hostname", host, "gputrace", "--log-file", log_file]
    if iterations is not None:
        argv += ["--iterations", str(iterations)]
    else:
        argv += ["--duration-ms", str(duration_ms or DYNO_DEFAULT_DURATION_MS)]
    argv += ["--process-limit", str(process_limit)]
    if job_id is not None:
        argv += ["--job-id", str(job_id)]
    if pids:
        argv += ["--pids", ",".join(str(p) for p in pids)]
    return argv


def _check_fields(scheduler: str, nodes: int, ranks_per_node: int, **optional: object) -> None:
    if scheduler not in ONE_PER_NODE:
        raise SpecError(
            f"scheduler {scheduler!r} has no dynolog recipe (known: {', '.join(ONE_PER_NODE)}); "
            "use 'pbs' or 'slurm'"
        )
    values = {"nodes": nodes, "ranks_per_node": ranks_per_node, **optional}
    for name, value in values.items():
        if value is None and name in optional:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SpecError(f"{name}={value!r} must be a whole number >= 1")


def _job_filter(scheduler: str, nodes: int, job_id: str | int | None, pids: Sequence[int]):
    if job_id is not None and scheduler not in JOB_ID_VAR:
        raise SpecError(
            f"job_id={'$SLURM_JOB_ID' if job_id is True else job_id!r} filters nothing under "
            f"{scheduler}: Kineto knows only Slurm job "
            "ids (SLURM_JOB_ID); filter by pids on a one-node job, or leave both unset"
        )
    if job_id is True:
        return JOB_ID_VAR[scheduler]
    if pids and nodes != 1:
        raise SpecError(
            f"pids={list(pids)} name processes of one node, but the job has {nodes} nodes; "
            "use job_id under Slurm, or trigger that node alone"
        )
    if any(isinstance(p, bool) or not isinstance(p, int) or p < 1 for p in pids):
        raise SpecError(f"pids={list(pids)!r} must be process ids (whole numbers >= 1)")
    return job_id


def dynolog_recipe(
    scheduler: str,
    nodes: int,
    ranks_per_node: int,
    iterations: int | None = 5,
    log_file: str = "$HPCPROF_RUN_DIR/traces/dynolog/trace.json",
    *,
    duration_ms: int | None = None,
    torch_version: str | None = None,
    job_id: str | int | bool | None = None,
    pids: Sequence[int] = (),
    job_log: str = "$HPCPROF_RUN_DIR/stderr",
) -> str:
    """Lines to start one daemon per node, run the ranks with the daemon, check that they
    registered, and trigger every node.

    ``torch_version``: the ranks' torch; None decides the init delay in the job itself.
    ``iterations=None`` traces ``duration_ms`` (default 500) instead. ``job_id=True`` filters
    by ``$SLURM_JOB_ID`` (Slurm only); ``pids`` filter a one-node job. ``job_log``: where the
    ranks' stderr goes (the registration line is checked there).
    """
    _check_fields(scheduler, nodes, ranks_per_node, iterations=iterations, duration_ms=duration_ms)
    job = _job_filter(scheduler, nodes, job_id, pids)
    limit = max(ranks_per_node, DYNO_DEFAULT_PROCESS_LIMIT)
    start = ONE_PER_NODE[scheduler].format(nodes=nodes)
    argv = dyno_command("$host", log_file, iterations=iterations, duration_ms=duration_ms,
                        process_limit=limit, job_id=job, pids=pids)  # fmt: skip
    trigger = " ".join(f'"{a}"' if "$" in a else shlex.quote(a) for a in argv)
    fallback = (
        f"# An app without optimizer steps gets a {DYNO_DEFAULT_DURATION_MS} ms duration trace "
        "instead; to choose it, trigger with --duration-ms MS in place of --iterations."
        if iterations is not None
        else "# A duration trace: for N optimizer steps, trigger with --iterations N instead."
    )
    return "\n".join([
        "# Needs dynolog on every node and torch >= 2.0 (2.7 or newer avoids Kineto's init issues).",
        "# 1. In the job script, before the ranks start: one dynolog daemon per node.",
        f"mkdir -p \"$(dirname \"{log_file}\")\"",
        f"{start} dynolog --enable_ipc_monitor &",
        "#    (With root, the daemon can be Dynolog's systemd service instead, with",
        "#    --enable_ipc_monitor in /etc/dynolog.gflags; a job has no root, so it starts its own.)",
        *_env_lines(torch_version),
        "# 3. While the job trains, from a shell inside the job: check that the ranks registered,",
        "#    then trace every node.",
        f"if grep -q \"{INIT_DELAY_ERROR}\" \"{job_log}\"; then",
        "    echo \"Kineto init failed: unset KINETO_DAEMON_INIT_DELAY_S (torch >= 2.3)\" >&2",
        f"elif ! grep -q \"{REGISTRATION_LINE}\" \"{job_log}\"; then",
        f"    echo \"no rank registered with dynolog yet (no '{REGISTRATION_LINE}' in {job_log})\" >&2",
        "fi",
        f"for host in $({HOST_LIST[scheduler]}); do",
        f"    {trigger}",
        "done",
        fallback,
        f"# Each rank writes <log-file stem>_<pid>.json; --process-limit {limit} >= {ranks_per_node} ranks per node.",
        "",
    ])  # fmt: skip


def check_registration(log_text: str, ranks: int | None = None, where: str = "the job log") -> int:
    """How many ranks printed Kineto's registration line; OnDemandError naming the cause when
    none did (or fewer than ``ranks``), or when the init delay broke Kineto's init.

    >>> check_registration("INFO:2022-10-22 00:59:13 151209:151209 init.cpp:98] "
    ...                    "Registering daemon config loader")
    1
    """
    if INIT_DELAY_ERROR in log_text:
        raise OnDemandError(
            f"{where} says 'ERROR: {INIT_DELAY_ERROR}': KINETO_DAEMON_INIT_DELAY_S breaks "
            "Kineto's init on torch >= 2.3; unset it (dynolog_recipe(torch_version=...) sets it "
            "only for older torch)"
        )
    found = log_text.count(REGISTRATION_LINE)
    if found == 0 or (ranks is not None and found < ranks):
        raise OnDemandError(
            f"{found} of {ranks if ranks is not None else 'the'} ranks printed "
            f"'{REGISTRATION_LINE}' in {where}: export KINETO_USE_DAEMON=1 before the ranks "
            "start, and leave KINETO_LOG_LEVEL unset (a level that hides INFO lines hides it)"
        )
    return found
