"""Render a ``JobSpec`` into the job script: one Jinja2 template per scheduler, one launch line
per launcher. A pure function of the spec: the same spec always gives the same text.

>>> from hpcprof_kit.jobs import JobSpec
>>> script = JobSpec(system="local", example="seqpar").render()
>>> script.splitlines()[-1].strip()
'python3 -m hpcprof_kit.apps.seqpar'
"""

from __future__ import annotations

import html
import importlib
import re
import shlex
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING

from hpcprof_kit.errors import SpecError
from hpcprof_kit.jobs.environment import activation_lines, resolve_venv
from hpcprof_kit.jobs.examples import EXAMPLES
from hpcprof_kit.systems import System

if TYPE_CHECKING:
    import jinja2

    from hpcprof_kit.jobs.spec import JobSpec

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Where each scheduler starts the job, used when the kit did not set HPCPROF_RUN_DIR.
_WORKDIR_DEFAULT = {
    "pbs": "${PBS_O_WORKDIR:-$PWD}",
    "slurm": "${SLURM_SUBMIT_DIR:-$PWD}",
    "none": "$PWD",
}


def _pals(spec: JobSpec, plan_args: list[str]) -> list[str]:
    return [
        "mpiexec", "-n", str(spec.total_ranks), "-ppn", str(spec.ranks_per_node),
        *plan_args, "-l", "--line-buffer", "--hostfile", '"$PBS_NODEFILE"',
    ]  # fmt: skip


def _hydra(spec: JobSpec, plan_args: list[str]) -> list[str]:
    return ["mpiexec", "-n", str(spec.total_ranks), *plan_args]


def _srun(spec: JobSpec, plan_args: list[str]) -> list[str]:
    return [
        "srun", "-N", str(spec.nodes), "--ntasks-per-node", str(spec.ranks_per_node),
        "--mpi=pmi2", *plan_args,
    ]  # fmt: skip


# One launch line per launcher (the system record names its launcher).
LAUNCHERS: dict[str, Callable[[JobSpec, list[str]], list[str]]] = {
    "pals": _pals,
    "hydra": _hydra,
    "srun": _srun,
}


def _optional(module: str, attribute: str):
    """A sibling room's function when that room exists; None while it is not there yet."""
    try:
        found = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name != module:
            raise
        return None
    return getattr(found, attribute, None)


def binding_preset(spec: JobSpec, sysrec: System) -> str:
    """The binding preset this spec asks for ('none' means no binding)."""
    return spec.binding if spec.binding is not None else (sysrec.default_binding or "none")


def binding_parts(spec: JobSpec, sysrec: System) -> tuple[list[str], dict[str, str], str]:
    """Launcher arguments, environment and per-rank wrapper ('' if none) of the binding plan."""
    preset = binding_preset(spec, sysrec)
    if preset == "none":
        return [], {}, ""
    plan_for = _optional("hpcprof_kit.affinity", "plan_for")
    if plan_for is None:
        if spec.binding is not None:
            raise SpecError(
                f"binding {spec.binding!r} needs hpcprof_kit.affinity, which is not installed "
                "here; leave binding=None or install the full kit"
            )
        return [], {}, ""  # the system default is applied once hpcprof_kit.affinity exists
    plan = plan_for(sysrec.name, spec.ranks_per_node, preset)
    # Plans that mask a different device per rank need a small per-rank wrapper script.
    wrapper = plan.rank_wrapper().rstrip("\n") if plan.needs_wrapper else ""
    _check_heredoc(wrapper, "HPCPROF_BIND_EOF")
    return list(plan.launcher_args(sysrec.launcher)), dict(plan.env()), wrapper


def _check_heredoc(text: str, marker: str) -> None:
    if f"\n{marker}\n" in f"\n{text}\n":
        raise SpecError(f"a generated wrapper contains the heredoc end marker {marker}; rename it")


def tracer_wrapper(spec: JobSpec, sysrec: System) -> str:
    """The vendor tracer's wrapper script, or '' when the spec uses none."""
    if spec.tracer is None:
        return ""
    wrapper_script = _optional("hpcprof_kit.tracers", "wrapper_script")
    if wrapper_script is None:
        raise SpecError(
            f"tracer {spec.tracer!r} needs hpcprof_kit.tracers, which is not installed here; "
            "leave tracer=None or install the full kit"
        )
    text = wrapper_script(
        spec.tracer,
        sysrec.name,
        spec.profrank,
        spec.rankcutoff,
        world_size=spec.total_ranks,
        ranks_per_node=spec.ranks_per_node,
    )
    _check_heredoc(text, "HPCPROF_TRACER_EOF")
    return text.rstrip("\n")


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


def tracer_module_lines(spec: JobSpec, sysrec: System) -> list[str]:
    """Load the tracer's site module, then check the tool is on PATH before any rank starts."""
    if spec.tracer is None:
        return []
    from hpcprof_kit.systems.modules import module_for

    tool, module = spec.tracer, module_for(sysrec, spec.tracer)
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


def _looks_expanded(word: str) -> bool:
    # shellcheck (SC2016) flags '$x' in single quotes; here the literal text is intended.
    return "$" in word or "`" in word


def _quote_all(words) -> str:
    return " ".join(shlex.quote(w) for w in words)


def template_values(spec: JobSpec) -> dict[str, object]:
    """Everything the templates fill in, already quoted for the shell."""
    sysrec = spec.validate().system_record()
    plan_args, plan_env, bind_wrapper = binding_parts(spec, sysrec)
    launcher = LAUNCHERS.get(sysrec.launcher)
    if launcher is None:
        raise SpecError(
            f"launcher {sysrec.launcher!r} of {sysrec.name} ({sysrec.source}) is unknown; "
            f"use one of {sorted(LAUNCHERS)}"
        )
    site_args = [str(a) for a in sysrec.extra.get("launcher_args", [])]
    launch = launcher(spec, [shlex.quote(a) for a in (*site_args, *plan_args)])
    command = list(spec.full_command())
    wrapper = tracer_wrapper(spec, sysrec)
    quoted_command = _quote_all(command)
    if wrapper:
        quoted_command = 'bash "$HPCPROF_RUN_DIR/tracer.sh" ' + quoted_command
    if bind_wrapper:  # outermost: the device mask must be set before a tracer starts
        quoted_command = 'bash "$HPCPROF_RUN_DIR/bind.sh" ' + quoted_command
    # spec.env in name order: the same spec (from JSON or not) gives the same text
    exports = {**sysrec.env_vars, **plan_env, **dict(sorted(spec.env.items()))}
    queue = spec.queue if spec.queue is not None else sysrec.default_queue
    what = EXAMPLES[spec.example].about if spec.command is None else "a custom command"
    return {
        "title": f"{spec.label} on {sysrec.name}: {what}",
        "system": shlex.quote(sysrec.name),
        "name": spec.job_name,
        "nodes": spec.nodes,
        "ranks_per_node": spec.ranks_per_node,
        "total_ranks": spec.total_ranks,
        "walltime": spec.walltime,
        "queue": queue,
        "account": spec.account or "",
        "filesystems": spec.filesystems
        if spec.filesystems is not None
        else sysrec.default_filesystems,
        "select_suffix": sysrec.extra.get("pbs_select_suffix", ""),
        "place": sysrec.extra.get("pbs_place", ""),
        "keep": sysrec.extra.get("pbs_keep", ""),
        "workdir_default": _WORKDIR_DEFAULT.get(sysrec.scheduler, "$PWD"),
        "setup": list(spec.setup if spec.setup is not None else sysrec.setup_lines),
        "tracer_modules": tracer_module_lines(spec, sysrec),
        "prepend": prepend_lines(sysrec),
        "activate": activation_lines(resolve_venv(spec, sysrec), sysrec.name),
        "exports": [(k, shlex.quote(str(v)), _looks_expanded(str(v))) for k, v in exports.items()],
        "literal_command": any(_looks_expanded(w) for w in command),
        "tracer": spec.tracer,
        # The exact ranks the wrapper's rule selects (tracers.traced_ranks), named in the script.
        "traced_ranks": _optional("hpcprof_kit.tracers", "describe_traced_ranks")(
            spec.total_ranks, spec.ranks_per_node, spec.profrank, spec.rankcutoff
        )
        if wrapper
        else "",
        "tracer_script": wrapper,
        "bind_script": bind_wrapper,
        "launch": " ".join(launch),
        "command": quoted_command,
    }


@lru_cache(maxsize=1)
def _environment() -> jinja2.Environment:
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("hpcprof_kit.jobs", "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,  # shell text, quoted by shlex before it reaches the template
    )


def render_script(spec: JobSpec) -> str:
    """The job script text for ``spec`` (validates it first)."""
    scheduler = spec.system_record().scheduler
    values = template_values(spec)
    template = _environment().get_template(f"{scheduler}.sh.j2")
    return template.render(**values)


class ScriptPreview:
    """A job script shown highlighted in a notebook; its plain-text form is the script itself."""

    def __init__(self, script: str) -> None:
        self.script = script

    def __repr__(self) -> str:
        return self.script

    def __str__(self) -> str:
        return self.script

    def _repr_html_(self) -> str:
        try:
            from pygments import highlight
            from pygments.formatters import HtmlFormatter
            from pygments.lexers import BashLexer
        except ImportError:
            return f"<pre>{html.escape(self.script)}</pre>"
        return highlight(self.script, BashLexer(), HtmlFormatter(noclasses=True))
