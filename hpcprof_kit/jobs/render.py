"""Render a resolved job (``hpcprof_kit.jobs.resolved``) into its job script: one Jinja2
template per scheduler. A pure function: the same job always gives the same text.

>>> from hpcprof_kit.jobs import JobSpec
>>> script = render_script(JobSpec(system="local", example="seqpar").resolve())
>>> script.splitlines()[-1].strip()
'python3 -m hpcprof_kit.apps.seqpar'
"""

from __future__ import annotations

import html
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import jinja2

    from hpcprof_kit.jobs.resolved import ResolvedJob


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


def render_script(job: ResolvedJob, ready_script: str | None = None) -> str:
    """The job script text for ``job`` (``JobSpec.resolve()`` makes one).

    ``ready_script`` names a ready script of ``jobs/`` (``"jobs/local/train.sh"``): its header
    then says where it comes from, since no run directory (and no spec.json) goes with it.

    >>> from hpcprof_kit.jobs import JobSpec
    >>> job = JobSpec(system="local").resolve()
    >>> render_script(job, "jobs/local/train.sh").splitlines()[3].split(",")[0]
    '# Ready script jobs/local/train.sh'
    """
    template = _environment().get_template(f"{job.scheduler}.sh.j2")
    return template.render(**job.template_values(), ready_script=ready_script)


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
