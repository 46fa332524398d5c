"""``JobSpec``: a validated description of one job, checked against its system record.

>>> from hpcprof_kit.jobs import JobSpec
>>> spec = JobSpec(system="aurora", nodes=2, ranks_per_node=12, account="MYPROJ")
>>> spec.validate().total_ranks
24
>>> JobSpec.from_json(spec.to_json()) == spec
True
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from hpcprof_kit.errors import SpecError
from hpcprof_kit.jobs.commands import absolute_paths, script_label, warn_missing_script
from hpcprof_kit.jobs.environment import resolve_venv
from hpcprof_kit.jobs.examples import EXAMPLES
from hpcprof_kit.jobs.queues import QueueLimits, resolve_queue, walltime_seconds
from hpcprof_kit.jobs.render import ScriptPreview, render_script
from hpcprof_kit.jobs.resolved import (
    Layout,
    ResolvedJob,
    launch_words,
    prepend_lines,
    resolve_binding,
    resolve_tracing,
)
from hpcprof_kit.jobs.site_checks import check_site_record
from hpcprof_kit.systems import System, load_system
from hpcprof_kit.tracer_ranks import check_rank_selection
from hpcprof_kit.tracers import check_tracer_options

__all__ = ["JobSpec", "ResolvedJob", "absolute_paths", "script_label", "walltime_seconds"]

TRACERS = ("unitrace", "nsys", "ncu")
# Job names reach the scheduler and file names: letters, digits, '.', '_', '-' only.
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,63}\Z")
_WORD = re.compile(r"^[A-Za-z0-9_.-]+\Z")  # queue, account
_FILESYSTEMS = re.compile(r"^[a-z_]+(:[a-z_]+)*\Z")
_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_STEPS = re.compile(r"^(\d{1,6})(?:-(\d{1,6}))?\Z")  # capture_steps: "A-B" or "A"


def _venv_ok(venv: object) -> bool:
    """A venv path the job script can name: one line, no quotes or expansions but $HOME/."""
    if not isinstance(venv, str):
        return False
    rest = venv.removeprefix("$HOME/").removeprefix("${HOME}/")
    return not any(c in rest for c in '\n\x00"`$\\')


@dataclass(frozen=True)
class JobSpec:
    """One job: where it runs, how many ranks, what it starts, and how it is observed."""

    system: str = "local"
    example: str = "train"
    command: tuple[str, ...] | None = None  # None -> the example's own command
    args: tuple[str, ...] = ()  # extra application arguments, appended
    nodes: int = 1
    ranks_per_node: int = 2
    walltime: str = "00:10:00"
    queue: str | None = None
    account: str | None = None
    filesystems: str | None = None
    name: str | None = None
    setup: tuple[str, ...] | None = None  # None -> the system's setup lines
    binding: str | None = None  # preset name; None -> the system's default
    profile: bool = False  # the example's --profile flag; refused with a command of your own
    tracer: str | None = None
    profrank: int = 0
    rankcutoff: int | None = None
    tracer_set: str | None = None  # a named flag set of the tracer (tracers.FLAG_SETS)
    tracer_args: tuple[str, ...] = ()  # your own extra tracer flags, one word each
    trace_all: bool = False  # every rank traced (no PROFRANK/RANKCUTOFF filter)
    # "A-B" (or "A"): only these steps recorded, wrapped in capture() by the app (nsys
    # --capture-range=cudaProfilerApi, unitrace --conditional-collection; no tracer: a
    # torch.profiler trace of those steps alone, HPCPROF_CAPTURE=torch)
    capture_steps: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    # The Python environment (venv) the job activates after the site modules; None -> the one
    # this kit runs from (see hpcprof_kit.jobs.environment), '' -> none.
    venv: str | None = None
    # The limits of the reservation ``queue`` names, {"nodes": 8, "walltime": "02:00:00"}, as a
    # workshop file gives them (``JobSpec.for_workshop``); None: the queue is looked up.
    reservation: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        # Lists from JSON or from a notebook become tuples, so the spec stays a value.
        for key in ("command", "args", "setup", "tracer_args"):
            value = getattr(self, key)
            if isinstance(value, str):
                raise SpecError(
                    f"{key} {value!r} is a string; pass a list of words, e.g. {value.split()!r}"
                )
            if value is not None and not isinstance(value, tuple):
                object.__setattr__(self, key, tuple(value))
        # Resolved now, where the relative names mean something (the job runs elsewhere).
        if self.command is not None:
            object.__setattr__(self, "command", absolute_paths(self.command))
        object.__setattr__(self, "args", absolute_paths(self.args))
        object.__setattr__(self, "env", dict(self.env or {}))
        if self.reservation is not None:
            if not isinstance(self.reservation, Mapping):
                raise SpecError(
                    f"reservation {self.reservation!r} is not a table; write "
                    '{"nodes": 8, "walltime": "02:00:00"} (the reservation\'s limits), or None'
                )
            object.__setattr__(self, "reservation", dict(self.reservation))

    @classmethod
    def for_workshop(cls, **fields: Any) -> JobSpec:
        """A spec whose left-out fields take the workshop file's values (``workshop.toml``,
        see :mod:`hpcprof_kit.workshop`): project, reservation queue with its limits,
        filesystems, venv; its proxy joins ``env`` (yours wins). ``system`` defaults to the
        workshop's. Without a workshop file this is ``JobSpec(**fields)``; ``JobSpec(...)``
        itself never reads the file, so the same call gives the same spec in any folder."""
        from hpcprof_kit.workshop import current

        return cls(**current().spec_fields(**fields))

    # ---- derived values -------------------------------------------------------------------
    @property
    def total_ranks(self) -> int:
        return self.nodes * self.ranks_per_node

    @property
    def label(self) -> str:
        """What names the run directory and the script's first line: the example, or for a
        custom command ``name`` (else its script, :func:`script_label`)."""
        if self.command is None:
            return self.example
        return self.name or script_label(self.command)

    @property
    def job_name(self) -> str:
        return self.name or f"hpcprof-{self.label}"

    def _reservation_limits(self) -> QueueLimits | None:
        if self.reservation is None:
            return None
        if not self.queue:
            raise SpecError(
                f"reservation {self.reservation!r} is given but queue is not: name the "
                "reservation's queue (queue='R123456'), or drop reservation"
            )
        from hpcprof_kit.jobs.queues import reservation_limits

        return reservation_limits(self.queue, self.reservation)

    def system_record(self) -> System:
        return load_system(self.system)

    def job_env(self) -> dict[str, str]:
        """The spec's environment for every rank: ``env``, plus ``HPCPROF_CAPTURE=torch`` when
        steps are captured without a tracer (a torch.profiler trace of those steps alone)."""
        if self.capture_steps is not None and self.tracer is None:
            return {"HPCPROF_CAPTURE": "torch", **self.env}
        return dict(self.env)

    def full_command(self) -> tuple[str, ...]:
        """The application command line each rank runs (without launcher or tracer)."""
        if self.command is not None:  # your own program: nothing of an example's is added
            return tuple(self.command) + tuple(self.args)
        example = EXAMPLES[self.example]
        flags = example.profile_flags if self.profile else ()
        if self.capture_steps is not None and example.capture_flag:
            flags = (*flags, example.capture_flag, self.capture_steps)
        return example.command + tuple(flags) + tuple(self.args)

    # ---- validation -----------------------------------------------------------------------
    def validate(self) -> JobSpec:
        """Check every field against the system record; returns self or raises SpecError."""
        self._check(self.system_record())
        return self

    def resolve(self) -> ResolvedJob:
        """Check this spec against its system record (loaded once) and decide everything the
        job script says: queue, launch line, binding, tracer, environment, command."""
        sysrec = self.system_record()
        queue = self._check(sysrec)
        at = Layout(self.nodes, self.ranks_per_node)
        binding = resolve_binding(self.binding, sysrec, self.ranks_per_node)
        tracing = resolve_tracing(self, sysrec, at)
        what = EXAMPLES[self.example].about if self.command is None else "a custom command"
        return ResolvedJob(
            system=sysrec,
            queue=queue,
            queue_name=self.queue if self.queue is not None else sysrec.default_queue,
            name=self.job_name,
            title=f"{self.label} on {sysrec.name}: {what}",
            layout=at,
            walltime=self.walltime,
            account=self.account,
            filesystems=self.filesystems
            if self.filesystems is not None
            else sysrec.default_filesystems,
            setup=tuple(self.setup if self.setup is not None else sysrec.setup_lines),
            venv=resolve_venv(self.venv, sysrec),
            env=tuple(sorted(self.job_env().items())),  # name order: JSON or not, same text
            binding=binding,
            tracing=tracing,
            command=self.full_command(),
            launch=" ".join(launch_words(sysrec, at, list(binding.launcher_args))),
            prepend=tuple(prepend_lines(sysrec)),
        )

    def _check(self, sysrec: System) -> QueueLimits:
        """Every field against ``sysrec``; the queue limits it was checked against."""
        where = f"on {sysrec.name} ({sysrec.source})"
        if self.example not in EXAMPLES:
            raise SpecError(
                f"example {self.example!r} is unknown (known: {', '.join(EXAMPLES)}); pick one "
                "of them, or run your own program: command=[...] in Python, '-- CMD ARGS' "
                "after hpcprof-kit render/submit (name='...' or --name names its run)"
            )
        if self.command is not None and not self.command:
            raise SpecError("command is empty; pass the program and its arguments as a list")
        if self.command is not None and self.profile:
            raise SpecError(
                f"profile=True adds the {self.example} example's "
                f"{' '.join(EXAMPLES[self.example].profile_flags)} flag, but command "
                f"{list(self.command)!r} is your own program; leave profile "
                "off and profile inside your script (hpcprof_kit.profiling.make_profiler), or "
                "put your program's own flag into command or args"
            )
        if self.command is None and self.profile and not EXAMPLES[self.example].profile_flags:
            raise SpecError(
                f"profile=True asks the {self.example} example to profile itself, but it has no "
                f"profiling flag ({EXAMPLES[self.example].about}: it records no traces); leave "
                "profile off"
            )
        for key in ("command", "args"):
            for word in getattr(self, key) or ():
                if not isinstance(word, str) or "\x00" in word:
                    raise SpecError(f"{key} word {word!r} must be a string without NUL bytes")
        if self.command is not None and sysrec.scheduler == "none":
            warn_missing_script((*self.command, *self.args))
        if not _NAME.match(self.job_name):
            raise SpecError(
                f"name {self.job_name!r} is not safe for the scheduler and the shell: use 1-64 "
                "letters, digits, '.', '_' or '-', starting with a letter"
            )
        for key in ("queue", "account"):  # before the queue name reaches a scheduler command
            value = getattr(self, key)
            if value and not _WORD.match(value):
                raise SpecError(
                    f"{key} {value!r} has characters a scheduler will not accept; "
                    "use letters, digits, '.', '_' or '-'"
                )
        # Listed, the reservation given, reported by the scheduler, or reservation-shaped.
        queue = resolve_queue(sysrec, self.queue, reservation=self._reservation_limits())
        self._check_ints(sysrec, queue, where)
        secs = walltime_seconds(self.walltime)
        if secs == 0:
            raise SpecError("walltime 00:00:00 is zero; ask for at least one second")
        if queue.max_walltime is not None and secs > walltime_seconds(queue.max_walltime):
            qname = f"queue {queue.name}'s" if queue.name else "the default queue's"
            raise SpecError(
                f"walltime {self.walltime} exceeds {qname} {queue.max_walltime} on "
                f"{sysrec.name} ({queue.source}); ask for at most {queue.max_walltime} "
                "or pick a queue with a longer limit"
            )
        shortest = sysrec.extra.get("queue_rules", {}).get("min_walltime")
        if shortest and secs < walltime_seconds(shortest):
            raise SpecError(
                f"walltime {self.walltime} is below {sysrec.name}'s minimum {shortest} for every "
                f"queue ({sysrec.source}); ask for at least {shortest}"
            )
        if sysrec.account_required and not self.account:
            raise SpecError(
                f"account is required {where}: pass account='<your project>' "
                "(the allocation the job is charged to)"
            )
        if self.filesystems is not None and not _FILESYSTEMS.match(self.filesystems):
            raise SpecError(
                f"filesystems {self.filesystems!r} is not a ':'-separated list of names "
                f"(e.g. {sysrec.default_filesystems or 'home:flare'!r})"
            )
        check_site_record(sysrec, queue.name, self.filesystems)
        self._check_tracer(sysrec, where)
        for key, value in self.env.items():
            if not (isinstance(key, str) and _ENV_KEY.match(key)):
                raise SpecError(
                    f"env name {key!r} is not a shell variable name (letters, digits, '_')"
                )
            if not isinstance(value, str) or "\x00" in value:
                raise SpecError(f"env {key}={value!r} must be a string without NUL bytes")
        if self.venv is not None and not _venv_ok(self.venv):
            raise SpecError(
                f"venv {self.venv!r} must be a folder path on one line, without quotes, "
                "backquotes, backslashes or '$' except a leading '$HOME/' "
                "(e.g. '$HOME/venvs/hpcprof-kit-aurora-frameworks-2025.3.1')"
            )
        for line in self.setup or ():
            if "\n" in line or "\x00" in line:
                raise SpecError(f"setup line {line!r} must be one line of shell")
        return queue

    def _check_ints(self, sysrec: System, queue: QueueLimits, where: str) -> None:
        lo, hi = queue.min_nodes, queue.max_nodes
        label = f"queue {queue.name}" if queue.name else "the default queue"
        qwhere = f"on {sysrec.name} ({queue.source})"
        if not isinstance(self.nodes, int) or isinstance(self.nodes, bool):
            raise SpecError(f"nodes {self.nodes!r} is not a whole number; pass an int, e.g. 1")
        if hi is not None and not lo <= self.nodes <= hi:
            raise SpecError(
                f"nodes {self.nodes} is outside {label}'s range {lo}-{hi} {qwhere}; "
                f"ask for {lo}-{hi} nodes or pick another queue"
            )
        if self.nodes < lo:
            raise SpecError(
                f"nodes {self.nodes} is below {label}'s minimum {lo} {qwhere}; "
                f"ask for at least {lo} node(s)"
            )
        topo = sysrec.topology
        if topo.gpus:
            limit, what = sysrec.devices_per_node, "devices per node"
        elif topo.known:
            limit, what = topo.physical_cores - len(topo.reserved_cores), "usable cores per node"
        else:
            limit, what = 4096, "ranks per node this kit accepts"
        if not isinstance(self.ranks_per_node, int) or isinstance(self.ranks_per_node, bool):
            raise SpecError(
                f"ranks_per_node {self.ranks_per_node!r} is not a whole number; pass an int, "
                "e.g. 2 (a value from JSON or a form arrives as text)"
            )
        if not 1 <= self.ranks_per_node <= limit:
            raise SpecError(
                f"ranks_per_node {self.ranks_per_node} is outside 1-{limit} ({what}) {where}; "
                f"use at most {limit}"
            )

    def _check_tracer(self, sysrec: System, where: str) -> None:
        if self.tracer is not None and self.tracer not in sysrec.vendor_tracers:
            known = ", ".join(sysrec.vendor_tracers) or "none"
            raise SpecError(
                f"tracer {self.tracer!r} is not available {where} (its vendor tracers: {known}); "
                "pick one of them or leave tracer=None"
            )
        if not isinstance(self.trace_all, bool):
            raise SpecError(f"trace_all {self.trace_all!r} is not True or False")
        check_tracer_options(self.tracer, self.tracer_set, self.tracer_args, self.trace_all)
        if self.trace_all and (self.profrank != 0 or self.rankcutoff is not None):
            raise SpecError(
                f"trace_all=True traces every rank, but profrank={self.profrank} and rankcutoff="
                f"{self.rankcutoff} select some; drop trace_all or the rank selection"
            )
        # The wrapper's rule (tracers.py): local rank == profrank and rank < rankcutoff.
        check_rank_selection(self.profrank, self.rankcutoff, self.ranks_per_node, self.total_ranks)
        self._check_capture()

    def _check_capture(self) -> None:
        if self.capture_steps is None:
            return
        m = _STEPS.match(self.capture_steps) if isinstance(self.capture_steps, str) else None
        first, last = (int(m.group(1)), int(m.group(2) or m.group(1))) if m else (0, -1)
        if last < first:
            raise SpecError(
                f"capture_steps {self.capture_steps!r} is not 'A-B' with A <= B (steps counted "
                "from 0, as ProfilerStep#N); write e.g. '3-4' or '3'"
            )
        if self.command is not None or EXAMPLES[self.example].capture_flag is None:
            what = "your own program" if self.command is not None else f"example {self.example}"
            raise SpecError(
                f"capture_steps {self.capture_steps!r}: {what} takes no --capture-steps flag; "
                "wrap the steps in hpcprof_kit.profiling.capture() in your code and pass its "
                "flag in command or args, or use example='train' or 'seqpar'"
            )
        if self.profile:
            raise SpecError(
                f"capture_steps {self.capture_steps!r} and profile=True both choose the steps "
                "to record; use one (capture_steps alone records a torch.profiler trace of "
                "those steps when no tracer is set)"
            )

    # ---- rendering and display ------------------------------------------------------------
    def render(self) -> str:
        """The job script for this spec (pure and deterministic): ``resolve()``, then the
        scheduler's template (``hpcprof_kit.jobs.render``)."""
        return render_script(self.resolve())

    def preview(self) -> ScriptPreview:
        """The script as a highlighted notebook display (its plain text is the script)."""
        return ScriptPreview(self.render())

    def with_(self, **changes: Any) -> JobSpec:
        """A copy with some fields changed: ``spec.with_(nodes=2)``."""
        return replace(self, **changes)

    def sweep(self, runs_root: str | None = None, **grid: Any) -> Any:
        """A sweep of this spec over ``grid`` (``hpcprof_kit.jobs.sweep``): one variant per
        combination, e.g. ``spec.sweep(nodes=[1, 2], **{"--dtype": ["float32", "bfloat16"]})``."""
        from hpcprof_kit.jobs import Sweep  # the package's face: sweeps sit downstream of specs

        return Sweep(self, grid, runs_root=runs_root).validate()

    # ---- JSON -----------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for key in ("command", "args", "setup", "tracer_args"):
            if d[key] is not None:
                d[key] = list(d[key])
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str | dict[str, Any]) -> JobSpec:
        data = json.loads(text) if isinstance(text, str) else dict(text)
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SpecError(
                f"spec JSON has unknown fields {unknown}; known fields: {sorted(known)}"
            )
        return cls(**data)
