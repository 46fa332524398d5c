"""Vendor tracer wrappers: unitrace (Aurora), nsys and ncu (Polaris), tracing only chosen ranks
(which ranks: :mod:`hpcprof_kit.tracer_ranks`).

``wrapper_script(tracer, system)`` renders a bash script that the job launches as
``bash "$HPCPROF_RUN_DIR/tracer.sh" <command>`` on every rank. A rank is traced when its local
rank equals ``PROFRANK`` and its global rank is below ``RANKCUTOFF`` (empty: no cutoff); every
other rank runs the command plainly with ``exec "$@"``. Both numbers are baked in as defaults
and can be overridden at run time through the environment of the same name. Outputs go to
``$HPCPROF_RUN_DIR/traces/<tool>/`` (``./traces/<tool>/`` outside a job).

>>> script = wrapper_script("nsys", "polaris", profrank=0, rankcutoff=4)
>>> 'RANKCUTOFF="${RANKCUTOFF-4}"' in script and '%q{PMI_RANK}' in script
True
"""

from __future__ import annotations

import shlex

from hpcprof_kit.errors import SpecError
from hpcprof_kit.ranks import LOCAL_RANK_VARS, RANK_VARS
from hpcprof_kit.systems import System, load_system
from hpcprof_kit.tracer_ranks import check_rank_selection, describe_traced_ranks

__all__ = [
    "FLAG_SETS", "NSYS_LOCK_DIR", "NSYS_LOCK_LINE", "TRACERS", "check_tracer_options", "flag_set_names", "unfiltered_ncu_warning",
    "warn_unfiltered_ncu", "wrapper_launch_line", "wrapper_script",
]  # fmt: skip

# Where each launcher puts the global rank, as the tool's own %q{VAR} should read it.
RANK_VAR_OF_LAUNCHER = {"pals": "PMI_RANK", "hydra": "PMI_RANK", "srun": "SLURM_PROCID"}
# The wrapper reads rank and local rank from the same chains as hpcprof_kit.ranks (first set wins).
RANK_CHAIN = tuple(name for name, _launcher in RANK_VARS)
LOCAL_RANK_CHAIN = LOCAL_RANK_VARS

# Where nsys keeps the lock of its node-wide session registry when TMPDIR is unset (nsys user
# guide: temporary files go to /tmp by default); HPCPROF_NSYS_LOCK_DIR in the job moves it.
NSYS_LOCK_DIR = "/tmp/nvidia"
# The node's lock folder as nsys itself would pick it: under the job's TMPDIR (where a site sets
# one), else under /tmp; read before the wrapper gives each rank its own TMPDIR.
NSYS_LOCK_LINE = 'nsys_lock="${HPCPROF_NSYS_LOCK_DIR:-${TMPDIR:-/tmp}/nvidia}"'

# Each tool: what it is for, the environment it needs, and its traced command line: the program,
# then the chosen flag set, the capture flags, your extra flags, then its outputs.
# $out is the tool's output folder, $run the run directory's name; $RANK_VAR becomes
# the launcher's rank variable, which the tool expands itself (%q{VAR}).
TRACERS: dict[str, dict[str, object]] = {
    "unitrace": {
        "title": "Intel unitrace (pti-gpu): host, Level Zero, SYCL, oneCCL, oneDNN and ITT timelines",
        "setup": [
            "# PyTorch ops reach unitrace as ITT tasks: the kit's profiling helpers honour this",
            "# and wrap the loop in torch.autograd.profiler.emit_itt().",
            "export HPCPROF_EMIT_ITT=1",
            'report="$out/${run}_rank${rank}"',
        ],
        "program": ["unitrace"],
        "outputs": ["--output-dir-path", '"$out"', "--output", '"${report}.txt"'],
        # capture() turns collection on and off (ITT resume/pause, PTI_ENABLE_COLLECTION).
        "capture": ["--conditional-collection"],
    },
    "nsys": {
        "title": "NVIDIA Nsight Systems: one timeline report per traced rank",
        "setup": [
            "# nsys keeps its scratch files in TMPDIR (the default is not writable under mpiexec):",
            "# one folder per rank. But nsys 2022.4 keeps one session registry per node (in",
            "# /dev/shm), locked through $TMPDIR/nvidia: that folder is the node's (nsys's default),",
            "# or ranks that start together lock it apart and can hang ('Agent launcher failed').",
            NSYS_LOCK_LINE,
            'export TMPDIR="$out/tmp/rank$rank"',
            'if ! mkdir -p "$nsys_lock" 2>/dev/null || [[ ! -w "$nsys_lock" ]]; then',
            '    nsys_lock="$out/tmp/nvidia"  # the job\'s ranks at least share one',
            "fi",
            'mkdir -p "$TMPDIR" "$nsys_lock"',
            'ln -sfn "$nsys_lock" "$TMPDIR/nvidia"',
        ],
        "program": ["nsys", "profile", "-o", '"$out/${run}_%q{$RANK_VAR}"'],
        "outputs": [],
        # capture() calls cudaProfilerStart/Stop around the chosen steps (docs: nsys user guide,
        # "--capture-range"); collection ends at the stop.
        "capture": ["--capture-range=cudaProfilerApi", "--capture-range-end=stop"],
    },
    "ncu": {
        "title": "NVIDIA Nsight Compute: kernel metrics (set NCU_SET, and NCU_KERNEL to pick a kernel)",
        "setup": [
            "# --set basic|detailed|full|roofline (basic: ncu's default); -k picks kernels by name.",
            'ncu_args=(--set "${NCU_SET:-@SET@}")',
            'if [[ -n "${NCU_KERNEL:-}" ]]; then ncu_args+=(-k "$NCU_KERNEL"); fi',
            'if [[ -n "${NCU_LAUNCH_SKIP:-}" ]]; then ncu_args+=(--launch-skip "$NCU_LAUNCH_SKIP"); fi',
            'if [[ -n "${NCU_LAUNCH_COUNT:-}" ]]; then ncu_args+=(--launch-count "$NCU_LAUNCH_COUNT"); fi',
        ],
        # The job's environment variables the wrapper turns into ncu options (see
        # hpcprof_kit.nsight.plan, which fills them from an nsys summary).
        "env_options": {
            "NCU_SET": "--set",
            "NCU_KERNEL": "-k",
            "NCU_LAUNCH_SKIP": "--launch-skip",
            "NCU_LAUNCH_COUNT": "--launch-count",
        },
        "program": ["ncu", '"${ncu_args[@]}"'],
        "outputs": ["-o", '"$out/${run}_%q{$RANK_VAR}"'],
        # Profile only between cudaProfilerStart and Stop (docs: ncu CLI, --profile-from-start).
        "capture": ["--profile-from-start", "off"],
    },
}

# Named flag sets per tracer, the default first. More flags, bigger profiles (ALCF's Aurora
# profiling guide: "Based on the number of options, the sizes of the output profiles will
# vary"): choose what you need.
FLAG_SETS: dict[str, dict[str, list[str]]] = {
    "unitrace": {
        # the Aurora guide's UNITRACE_OPTS, plus the ITT ranges torch's emit_itt() writes, which reach
        # the timeline only with --chrome-itt-logging (docs: aurora/performance-tools/unitrace.md)
        "standard": [
            "--chrome-mpi-logging", "--chrome-sycl-logging", "--chrome-device-logging",
            "--chrome-ccl-logging", "--chrome-call-logging", "--chrome-dnn-logging",
            "--chrome-itt-logging", "--device-timing", "--host-timing", "--ccl-summary-report",
        ],
        # kernels on the device timeline and the PyTorch ranges only: the smallest profile
        "minimal": ["--chrome-device-logging", "--chrome-itt-logging", "--device-timing"],
        # standard plus each kernel's host-side submission on the timeline
        "full": [
            "--chrome-mpi-logging", "--chrome-sycl-logging", "--chrome-device-logging",
            "--chrome-kernel-logging", "--chrome-ccl-logging", "--chrome-call-logging",
            "--chrome-dnn-logging", "--chrome-itt-logging", "--device-timing", "--host-timing",
            "--ccl-summary-report",
        ],
    },
    "nsys": {
        # the Polaris guide's NSYS_OPTS: nsys's default traces (CUDA, NVTX, OS runtime) and the summary
        "standard": ["--stats=true", "--show-output=true"],
        # CUDA and NVTX only, no CPU sampling or context switches: the smallest report
        "minimal": ["--trace=cuda,nvtx", "--sample=none", "--cpuctxsw=none", "--stats=true"],
        # the host side only (OS runtime calls and NVTX ranges): a CPU-only code, or a check of
        # the wrapper on a machine without a GPU
        "host": ["--trace=osrt,nvtx", "--sample=none", "--cpuctxsw=none"],
        # the communication too: MPI calls (Cray MPICH) beside cuDNN, cuBLAS and memory use
        "full": [
            "--trace=cuda,nvtx,osrt,cudnn,cublas,mpi", "--mpi-impl=mpich",
            "--cuda-memory-usage=true", "--stats=true", "--show-output=true",
        ],
    },
    # ncu's own sections (--set); NCU_SET in the job's environment still wins
    "ncu": {"detailed": [], "basic": [], "roofline": [], "full": []},
}  # fmt: skip


def flag_set_names(tracer: str) -> list[str]:
    """The flag sets of ``tracer``, the default first.

    >>> flag_set_names("unitrace")
    ['standard', 'minimal', 'full']
    """
    return list(FLAG_SETS.get(tracer, {}))


def check_tracer_options(
    tracer: str | None, flag_set: str | None, extra: tuple[str, ...] = (), all_ranks: bool = False
) -> None:
    """SpecError unless the tracer options fit ``tracer`` (each names the field and the fix)."""
    if tracer is None:
        for name, value in (("tracer_set", flag_set), ("tracer_args", extra)):
            if value:
                raise SpecError(f"{name} {value!r} needs a tracer; set tracer='nsys', ...")
        if all_ranks:
            raise SpecError("trace_all=True needs a tracer; set tracer='nsys', ... or drop it")
        return
    if flag_set is not None and flag_set not in FLAG_SETS.get(tracer, {}):
        raise SpecError(
            f"tracer_set {flag_set!r} is not a flag set of {tracer} (its sets: "
            f"{', '.join(flag_set_names(tracer))}); pick one, or add flags with tracer_args"
        )
    for word in extra:
        if not isinstance(word, str) or not word or any(c in word for c in "\n\x00"):
            raise SpecError(
                f"tracer_args word {word!r} must be a non-empty string on one line; pass each "
                "flag as its own word, e.g. ['--trace=cuda,nvtx']"
            )


def _flags(tracer: str, flag_set: str | None, capture: bool, extra: tuple[str, ...]) -> list[str]:
    chosen = FLAG_SETS[tracer][flag_set or flag_set_names(tracer)[0]]
    captured = list(TRACERS[tracer]["capture"]) if capture else []  # type: ignore[arg-type]
    return [*chosen, *captured, *(shlex.quote(w) for w in extra)]


def _chain(names: tuple[str, ...], default: str) -> str:
    """A bash expansion that takes the first set variable: ${A:-${B:-...}}."""
    text = default
    for name in reversed(names):
        text = f"${{{name}:-{text}}}"
    return text


def _system(system: str | System) -> System:
    return system if isinstance(system, System) else load_system(system)


def wrapper_script(
    tracer: str,
    system: str | System,
    profrank: int = 0,
    rankcutoff: int | None = None,
    *,
    world_size: int | None = None,
    ranks_per_node: int | None = None,
    flag_set: str | None = None,
    extra: tuple[str, ...] = (),
    capture: bool = False,
    all_ranks: bool = False,
) -> str:
    """The bash wrapper that runs ``tracer`` on the selected ranks of a job on ``system``.

    Given the job's ``world_size`` and ``ranks_per_node``, the header also names the exact
    ranks traced (and the selection is checked against that job's shape). ``flag_set`` picks
    one of :data:`FLAG_SETS` (default: the first), ``extra`` adds your own flags, ``capture``
    records only the app's ``capture()`` region (``--capture-steps``), and ``all_ranks``
    traces every rank (nsys without a rank filter, as ALCF's sequence-parallel hands-on does)
    instead of PROFRANK/RANKCUTOFF.

    >>> print(wrapper_script("ncu", "polaris").splitlines()[1])
    # hpcprof-kit tracer wrapper: ncu on polaris
    >>> text = wrapper_script("nsys", "polaris", 0, 8, world_size=8, ranks_per_node=4)
    >>> [line for line in text.splitlines() if line.startswith("# This job")]
    ['# This job (8 ranks, 4 per node) traces ranks 0, 4.']
    """
    sysrec = _system(system)
    if tracer not in TRACERS:
        raise SpecError(
            f"tracer {tracer!r} is unknown (known: {', '.join(TRACERS)}); pick one of them"
        )
    if tracer not in sysrec.vendor_tracers:
        offered = ", ".join(sysrec.vendor_tracers) or "none"
        raise SpecError(
            f"tracer {tracer!r} is not offered on {sysrec.name} (its record lists: {offered}); "
            f"pick one of those, or add {tracer!r} to vendor_tracers in {sysrec.source}"
        )
    check_tracer_options(tracer, flag_set, extra, all_ranks)
    if not all_ranks:
        check_rank_selection(profrank, rankcutoff, ranks_per_node, world_size)
    tool = TRACERS[tracer]
    rank_var = RANK_VAR_OF_LAUNCHER.get(sysrec.launcher, "PMI_RANK")
    words = [*tool["program"], *_flags(tracer, flag_set, capture, extra), *tool["outputs"]]  # type: ignore[misc]
    command = " ".join(str(part) for part in words).replace("$RANK_VAR", rank_var)
    chosen = flag_set or flag_set_names(tracer)[0]
    setup = [line.replace("@SET@", chosen) for line in tool["setup"]]  # type: ignore[union-attr]
    lines = [
        "#!/usr/bin/env bash",
        f"# hpcprof-kit tracer wrapper: {tracer} on {sysrec.name}",
        f"# {tool['title']}.",
        *_selection_lines(profrank, rankcutoff, world_size, ranks_per_node, all_ranks),
        "set -euo pipefail",
        'if (( $# == 0 )); then echo "usage: bash tracer.sh <command> [args...]" >&2; exit 2; fi',
        "",
        *_rank_filter(profrank, rankcutoff, all_ranks),
        'run_dir="${HPCPROF_RUN_DIR:-$PWD}"',
        'run="$(basename "$run_dir")"',
        f'out="$run_dir/traces/{tracer}"',
        'mkdir -p "$out"',
        *setup,
        f'echo "hpcprof-kit: {tracer} traces rank $rank (local rank $local_rank) into $out" >&2',
        f'exec {command} "$@"',
        "",
    ]
    return "\n".join(lines)


def _selection_lines(
    profrank: int,
    rankcutoff: int | None,
    world_size: int | None,
    ranks_per_node: int | None,
    all_ranks: bool,
) -> list[str]:
    """The header's words on which ranks are traced."""
    if all_ranks:
        shape = f" ({world_size} ranks)" if world_size is not None else ""
        return [
            f"# Traces every rank{shape}: one report each, as nsys runs without a wrapper.",
            "# Usage: bash tracer.sh <command> [args...]",
        ]
    return [
        "# Traces the ranks whose local rank is PROFRANK and whose global rank is below RANKCUTOFF",
        "# (empty: no cutoff); every other rank runs the command plainly.",
        *_job_line(world_size, ranks_per_node, profrank, rankcutoff),
        "# Usage: bash tracer.sh <command> [args...]   (override PROFRANK/RANKCUTOFF via env)",
    ]


def _rank_filter(profrank: int, rankcutoff: int | None, all_ranks: bool) -> list[str]:
    """The lines that read the rank and run unselected ranks plainly."""
    ranks = [f'rank="{_chain(RANK_CHAIN, "0")}"', f'local_rank="{_chain(LOCAL_RANK_CHAIN, "0")}"']
    if all_ranks:
        return [*ranks, ""]
    cutoff = "" if rankcutoff is None else str(rankcutoff)
    return [
        f'PROFRANK="${{PROFRANK-{profrank}}}"',
        f'RANKCUTOFF="${{RANKCUTOFF-{cutoff}}}"',
        *ranks,
        "",
        'if [[ "$local_rank" != "$PROFRANK" ]] || { [[ -n "$RANKCUTOFF" ]] && (( rank >= RANKCUTOFF )); }; then',
        '    exec "$@"',
        "fi",
        "",
    ]


def _job_line(
    world_size: int | None, ranks_per_node: int | None, profrank: int, rankcutoff: int | None
) -> list[str]:
    """The header line naming the exact ranks, when the job's shape is known."""
    if world_size is None or ranks_per_node is None:
        return []
    ranks = describe_traced_ranks(world_size, ranks_per_node, profrank, rankcutoff)
    return [f"# This job ({world_size} ranks, {ranks_per_node} per node) traces {ranks}."]


def unfiltered_ncu_warning(tracer: str | None, env: dict[str, str] | None) -> str | None:
    """The warning for an ncu job with no kernel filter (``NCU_KERNEL`` unset), else None.

    Without ``-k`` ncu replays every kernel launch of the traced ranks, each many times: a job
    that ran minutes plainly then outlives its walltime. Call it (or :func:`warn_unfiltered_ncu`)
    before submitting.

    >>> unfiltered_ncu_warning("ncu", {"NCU_KERNEL": "ampere_sgemm_128x128_tn"}) is None
    True
    >>> unfiltered_ncu_warning("ncu", {}).split(":")[0]
    'ncu job with no kernel filter'
    """
    if tracer != "ncu" or (env or {}).get("NCU_KERNEL"):
        return None
    return (
        "ncu job with no kernel filter: NCU_KERNEL is unset, so ncu profiles every kernel "
        "launch of the traced ranks (each replayed many times) and the job may outlive its "
        "walltime; pick a kernel from the nsys summary (hpcprof-kit ncu-plan RUN_DIR) or set "
        "env={'NCU_KERNEL': '<name>'}"
    )


def warn_unfiltered_ncu(spec: object) -> str | None:
    """Warn (KitWarning) when ``spec`` (a JobSpec) is an ncu job with no kernel filter; returns
    the message, or None when the spec is fine."""
    import warnings

    from hpcprof_kit.errors import KitWarning

    message = unfiltered_ncu_warning(getattr(spec, "tracer", None), getattr(spec, "env", None))
    if message:
        warnings.warn(message, KitWarning, stacklevel=2)
    return message


def wrapper_launch_line(tracer_path: str, command: list[str]) -> str:
    """How the job starts each rank through the wrapper (one line, shell-quoted)."""
    return " ".join(["bash", shlex.quote(tracer_path), *map(shlex.quote, command)])
