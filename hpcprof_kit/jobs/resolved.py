"""A resolved job: a ``JobSpec`` checked against its system record, with every choice of the
job script made — queue, launch line, binding, tracer, environment, command — ready for the
templates (``hpcprof_kit.jobs.render``). ``JobSpec.resolve()`` builds it, loading the system
record once; nothing here reads a spec, so data flows one way: spec -> resolved -> render.

>>> from hpcprof_kit.jobs import JobSpec
>>> job = JobSpec(system="polaris", nodes=2, ranks_per_node=4, account="P").resolve()
>>> job.queue.name, job.launch.split()[:5]
('debug', ['mpiexec', '-n', '8', '-ppn', '4'])
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from hpcprof_kit.affinity.presets import plan_for
from hpcprof_kit.errors import SpecError
from hpcprof_kit.jobs.environment import activation_lines
from hpcprof_kit.jobs.queues import QueueLimits
from hpcprof_kit.systems import System
from hpcprof_kit.systems.modules import module_for
from hpcprof_kit.tracer_ranks import describe_traced_ranks
from hpcprof_kit.tracers import wrapper_script

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
# Where each scheduler starts the job, used when the kit did not set HPCPROF_RUN_DIR.
_WORKDIR_DEFAULT = {
    "pbs": "${PBS_O_WORKDIR:-$PWD}",
    "slurm": "${SLURM_SUBMIT_DIR:-$PWD}",
    "none": "$PWD",
}


@dataclass(frozen=True)
class Layout:
    """How many ranks on how many nodes."""

    nodes: int
    ranks_per_node: int

    @property
    def total_ranks(self) -> int:
        return self.nodes * self.ranks_per_node


def _pals(at: Layout, args: list[str]) -> list[str]:
    return [
        "mpiexec", "-n", str(at.total_ranks), "-ppn", str(at.ranks_per_node),
        *args, "-l", "--line-buffer", "--hostfile", '"$PBS_NODEFILE"',
    ]  # fmt: skip


def _hydra(at: Layout, args: list[str]) -> list[str]:
    return ["mpiexec", "-n", str(at.total_ranks), *args]


def _srun(at: Layout, args: list[str]) -> list[str]:
    return [
        "srun", "-N", str(at.nodes), "--ntasks-per-node", str(at.ranks_per_node), *args,
    ]  # fmt: skip


# One launch line per launcher (the system record names its launcher).
LAUNCHERS: dict[str, Callable[[Layout, list[str]], list[str]]] = {
    "pals": _pals,
    "hydra": _hydra,
    "srun": _srun,
}


def launch_words(sysrec: System, at: Layout, plan_args: list[str]) -> list[str]:
    """The launcher and its arguments (site's, then the binding plan's), quoted for bash."""
    launcher = LAUNCHERS.get(sysrec.launcher)
    if launcher is None:
        raise SpecError(
            f"launcher {sysrec.launcher!r} of {sysrec.name} ({sysrec.source}) is unknown; "
            f"use one of {sorted(LAUNCHERS)}"
        )
    site_args = [str(a) for a in sysrec.extra.get("launcher_args", [])]
    return launcher(at, [shlex.quote(a) for a in (*site_args, *plan_args)])


def binding_preset(binding: str | None, sysrec: System) -> str:
    """The binding preset a spec's ``binding`` asks for ('none' means no binding)."""
    return binding if binding is not None else (sysrec.default_binding or "none")


@dataclass(frozen=True)
class Binding:
    """The binding plan's part of the script: launcher arguments, environment, rank wrapper."""

    preset: str
    launcher_args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    wrapper: str = ""  # a per-rank script, when each rank masks a different device


def resolve_binding(binding: str | None, sysrec: System, ranks_per_node: int) -> Binding:
    preset = binding_preset(binding, sysrec)
    if preset == "none":
        return Binding(preset)
    plan = plan_for(sysrec, ranks_per_node, preset)
    wrapper = plan.rank_wrapper().rstrip("\n") if plan.needs_wrapper else ""
    _check_heredoc(wrapper, "HPCPROF_BIND_EOF")
    args = tuple(plan.launcher_args(sysrec.launcher))
    env = plan.env()
    cores = [len(c) for c in plan.cpus if c]
    if sysrec.scheduler == "pbs" and cores and len(cores) == len(plan.cpus):
        # PBS sets OMP_NUM_THREADS from ncpus (1 for a select without it): each rank gets as
        # many threads as the plan gives it cores instead (JobSpec(env=...) still wins)
        env["OMP_NUM_THREADS"] = str(min(cores))
    return Binding(preset, args, tuple(env.items()), wrapper)


def _check_heredoc(text: str, marker: str) -> None:
    if f"\n{marker}\n" in f"\n{text}\n":
        raise SpecError(f"a generated wrapper contains the heredoc end marker {marker}; rename it")


@dataclass(frozen=True)
class Tracing:
    """The vendor tracer's part of the script: module lines, wrapper, the ranks it traces."""

    tracer: str | None = None
    module_lines: tuple[str, ...] = ()
    wrapper: str = ""
    traced_ranks: str = ""  # in words, for the script's comment


class TracerChoice(Protocol):
    """The fields of a job spec that choose its tracer (``JobSpec`` has them all)."""

    tracer: str | None
    profrank: int
    rankcutoff: int | None
    tracer_set: str | None
    tracer_args: tuple[str, ...]
    trace_all: bool
    capture_steps: str | None


def resolve_tracing(choice: TracerChoice, sysrec: System, at: Layout) -> Tracing:
    tracer = choice.tracer
    if tracer is None:
        return Tracing()
    text = wrapper_script(
        tracer,
        sysrec,
        choice.profrank,
        choice.rankcutoff,
        world_size=at.total_ranks,
        ranks_per_node=at.ranks_per_node,
        flag_set=choice.tracer_set,
        extra=tuple(choice.tracer_args),
        capture=choice.capture_steps is not None,
        all_ranks=choice.trace_all,
    )
    _check_heredoc(text, "HPCPROF_TRACER_EOF")
    traced = describe_traced_ranks(
        at.total_ranks, at.ranks_per_node, choice.profrank, choice.rankcutoff,
        all_ranks=choice.trace_all,
    )  # fmt: skip
    return Tracing(tracer, tuple(tracer_module_lines(tracer, sysrec)), text.rstrip("\n"), traced)


def tracer_module_lines(tool: str, sysrec: System) -> list[str]:
    """Load the tracer's site module, then check the tool is on PATH before any rank starts."""
    module = module_for(sysrec, tool)
    if module is None:
        where = "is not on PATH; load the module that provides it in JobSpec(setup=[...])"
        return [
            f'command -v {tool} >/dev/null || {{ echo "hpcprof-kit: {tool} {where}" >&2; exit 1; }}'
        ]
    fix = (
        f"{tool} is not on PATH after 'module load {module.name}'; see 'module avail "
        f"{module.family}' (the module may have moved) and update modules in {sysrec.source}"
    )
    lines = [f"module use {shlex.quote(module.use)}"] if module.use else []
    return [
        *lines,
        f"module load {shlex.quote(module.name)}",
        f'command -v {tool} >/dev/null || {{ echo "hpcprof-kit: {fix}" >&2; exit 1; }}',
    ]


def prepend_lines(sysrec: System) -> list[str]:
    """``export VAR=dirs${VAR:+:$VAR}`` for the record's ``[environment.prepend]`` paths."""
    lines = []
    for key, folders in sysrec.extra.get("prepend", {}).items():
        if not _ENV_NAME.match(key) or not isinstance(folders, list):
            raise SpecError(
                f"environment.prepend {key!r} of {sysrec.source} must map a variable name to "
                'a list of folders, e.g. LD_LIBRARY_PATH = ["/soft/lib"]'
            )
        joined = shlex.quote(":".join(str(f) for f in folders))
        lines.append(f"export {key}={joined}${{{key}:+:${key}}}")
    return lines


def _looks_expanded(word: str) -> bool:
    # shellcheck (SC2016) flags '$x' in single quotes; here the literal text is intended.
    return "$" in word or "`" in word


@dataclass(frozen=True)
class ResolvedJob:
    """Everything the job script says, decided. Built by ``JobSpec.resolve()``."""

    system: System
    queue: QueueLimits  # the limits the spec was checked against
    queue_name: str | None  # what the script asks for (None: the scheduler's default)
    name: str
    title: str
    layout: Layout
    walltime: str
    account: str | None
    filesystems: str | None
    setup: tuple[str, ...]
    venv: str  # '' = none
    env: tuple[tuple[str, str], ...]  # the spec's own, in name order
    binding: Binding
    tracing: Tracing
    command: tuple[str, ...]  # what each rank runs, before the wrappers
    launch: str  # the launcher and its arguments, without the rank's command
    prepend: tuple[str, ...]  # the record's [environment.prepend] lines

    @property
    def scheduler(self) -> str:
        return self.system.scheduler

    def exports(self) -> dict[str, str]:
        """The variables every rank gets: the system's, the binding plan's, then the spec's."""
        return {**self.system.env_vars, **dict(self.binding.env), **dict(self.env)}

    def command_line(self) -> str:
        """The rank's command, quoted, inside the tracer's and then the binding's wrapper."""
        line = " ".join(shlex.quote(w) for w in self.command)
        if self.tracing.wrapper:
            line = 'bash "$HPCPROF_RUN_DIR/tracer.sh" ' + line
        if self.binding.wrapper:  # outermost: the device mask must be set before a tracer starts
            line = 'bash "$HPCPROF_RUN_DIR/bind.sh" ' + line
        return line

    def template_values(self) -> dict[str, object]:
        """Everything the templates fill in, already quoted for the shell."""
        sysrec, at = self.system, self.layout
        exports = self.exports()
        return {
            "title": self.title,
            "system": shlex.quote(sysrec.name),
            "systems_dir": shlex.quote(sysrec.folder) if sysrec.folder else "",
            "name": self.name,
            "nodes": at.nodes,
            "ranks_per_node": at.ranks_per_node,
            "total_ranks": at.total_ranks,
            "walltime": self.walltime,
            "queue": self.queue_name,
            "account": self.account or "",
            "filesystems": self.filesystems,
            "select_suffix": sysrec.extra.get("pbs_select_suffix", ""),
            "place": sysrec.extra.get("pbs_place", ""),
            "keep": sysrec.extra.get("pbs_keep", ""),
            "workdir_default": _WORKDIR_DEFAULT.get(sysrec.scheduler, "$PWD"),
            "setup": list(self.setup),
            "tracer_modules": list(self.tracing.module_lines),
            "prepend": list(self.prepend),
            "activate": activation_lines(self.venv, sysrec.name),
            "exports": [
                (k, shlex.quote(str(v)), _looks_expanded(str(v))) for k, v in exports.items()
            ],
            "literal_command": any(_looks_expanded(w) for w in self.command),
            "tracer": self.tracing.tracer,
            "traced_ranks": self.tracing.traced_ranks,
            "tracer_script": self.tracing.wrapper,
            "bind_script": self.binding.wrapper,
            "launch": self.launch,
            "command": self.command_line(),
        }
