"""``job_form()``: the fields of a job spec, the script they render (live), and a Submit button.

The preview is ``JobSpec(...).render()`` itself, so the script shown is byte for byte the script
submitted. A field the system rejects shows the kit's own message in place of the script.
"""

from __future__ import annotations

import html
from typing import Any

from hpcprof_kit.errors import KitError, SpecError
from hpcprof_kit.systems import load_system, system_names

_NO_QUEUE = "(no queue)"


class JobForm:
    """Widgets: ``system``, ``nodes``, ``ranks_per_node``, ``queue``, ``walltime``, ``account``,
    ``profile``, ``preview`` (HTML), ``submit_button``, ``status``; ``job`` after a submit."""

    def __init__(self, system: str = "local", example: str = "train", **fields: Any) -> None:
        import ipywidgets as w

        from hpcprof_kit.jobs import JobSpec

        known = set(JobSpec.__dataclass_fields__) - {"system", "example"}
        unknown = sorted(set(fields) - known)
        if unknown:
            raise SpecError(
                f"job_form got unknown field(s) {unknown}; JobSpec fields are {sorted(known)}"
            )
        self.example = example
        self.args = tuple(fields.pop("args", ()))
        self.extra = fields  # other JobSpec fields, passed through unchanged
        rec = load_system(system)
        style = {"description_width": "9em"}
        self.system = w.Dropdown(
            options=system_names(), value=system, description="system", style=style
        )
        self.nodes = w.BoundedIntText(
            value=self.extra.pop("nodes", 1), min=1, max=100_000, description="nodes", style=style
        )
        self.ranks_per_node = w.BoundedIntText(
            value=self.extra.pop("ranks_per_node", 2),
            min=1,
            max=1024,
            description="ranks per node",
            style=style,
        )
        self.queue = w.Dropdown(description="queue", style=style)
        self.walltime = w.Text(
            value=self.extra.pop("walltime", "00:10:00"), description="walltime", style=style
        )
        self.account = w.Text(
            value=self.extra.pop("account", None) or "", description="account", style=style
        )
        self.profile = w.Checkbox(
            value=bool(self.extra.pop("profile", False)), description="torch.profiler"
        )
        self.preview = w.HTML()
        self.submit_button = w.Button(description="Submit", button_style="primary", icon="play")
        self.status = w.HTML()
        self.job = None
        self.monitor = None
        self._set_queues(rec, self.extra.pop("queue", None))
        self.widget = w.VBox(
            [
                w.HBox([w.VBox([self.system, self.nodes, self.ranks_per_node, self.queue]),
                        w.VBox([self.walltime, self.account, self.profile])]),
                self.preview,
                w.HBox([self.submit_button, self.status]),
            ]
        )  # fmt: skip
        self.system.observe(self._system_changed, names="value")
        for field in (
            self.nodes,
            self.ranks_per_node,
            self.queue,
            self.walltime,
            self.account,
            self.profile,
        ):
            field.observe(lambda _change: self.update(), names="value")
        self.submit_button.on_click(lambda _button: self._submit_clicked())
        self.update()

    def _repr_mimebundle_(self, **kwargs: Any):
        return self.widget._repr_mimebundle_(**kwargs)

    def _set_queues(self, rec, queue: str | None) -> None:
        names = list(rec.queues) or [""]
        self._quiet = True  # swapping options fires value events; render once afterwards
        self.queue.options = [(n or _NO_QUEUE, n) for n in names]
        self.queue.value = (
            queue
            if queue in names
            else (rec.default_queue if rec.default_queue in names else names[0])
        )
        self._quiet = False

    def _system_changed(self, change: dict) -> None:
        self._set_queues(load_system(change["new"]), None)
        self.update()

    def spec(self):
        """The JobSpec the fields describe (not yet validated)."""
        from hpcprof_kit.jobs import JobSpec

        return JobSpec.for_workshop(
            system=self.system.value,
            example=self.example,
            nodes=self.nodes.value,
            ranks_per_node=self.ranks_per_node.value,
            queue=self.queue.value or None,
            walltime=self.walltime.value.strip(),
            account=self.account.value.strip() or None,
            profile=self.profile.value,
            args=self.args,
            **self.extra,
        )

    @property
    def script(self) -> str:
        """The script the preview shows ('' while a field is invalid)."""
        return self._script

    @property
    def error(self) -> str:
        """The kit's message about an invalid field ('' when the spec is valid)."""
        return self._error

    def update(self) -> None:
        """Re-render the preview from the fields (called on every change)."""
        if getattr(self, "_quiet", False):
            return
        try:
            self._script, self._error = self.spec().render(), ""
        except KitError as exc:
            self._script, self._error = "", str(exc)
        if self._error:
            self.preview.value = f'<pre style="color:#b00020">{html.escape(self._error)}</pre>'
        else:
            self.preview.value = f"<pre>{html.escape(self._script)}</pre>"
        self.submit_button.disabled = bool(self._error)

    def submit(self):
        """Submit the previewed spec and return its Job (also kept as ``form.job``)."""
        from hpcprof_kit.jobs import submit
        from hpcprof_kit.widgets.monitor import job_monitor

        self.job = submit(self.spec())
        self.monitor = job_monitor(self.job)
        self.widget.children = (*self.widget.children[:3], self.monitor.widget)
        self.status.value = html.escape(f"submitted {self.job.job_id} -> {self.job.run_dir.name}")
        return self.job

    def _submit_clicked(self) -> None:
        try:
            self.submit()
        except KitError as exc:
            self.status.value = f'<span style="color:#b00020">{html.escape(str(exc))}</span>'


def job_form(system: str = "local", example: str = "train", **fields: Any) -> JobForm:
    """A job form that previews the rendered script live and submits it.

    ``fields`` are JobSpec fields: nodes, ranks_per_node, queue, walltime, account, profile
    set the form's starting values; others (args, binding, tracer, ...) pass through.

    >>> form = job_form(system="local", ranks_per_node=2, profile=True)   # doctest: +SKIP
    >>> form.nodes.value = 3   # doctest: +SKIP
    >>> form.error                                                          # doctest: +SKIP
    "nodes 3 ... on local ..."
    """
    return JobForm(system=system, example=example, **fields)
