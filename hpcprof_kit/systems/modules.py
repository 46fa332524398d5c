"""The site modules a system record lists, and which one provides a tool.

A record's ``[[modules]]`` entries name the modules the kit loads on that site (the site
Python, the vendor tracers) and what each puts on PATH. Job scripts load a tracer's module
before they launch; ``doctor``, ``preflight`` and the rehearsal read the same entries.

>>> from hpcprof_kit.systems import load_system
>>> module_for(load_system("aurora"), "unitrace").name
'pti-gpu'
>>> module_for(load_system("local"), "unitrace") is None
True
"""

from __future__ import annotations

from dataclasses import dataclass

from hpcprof_kit.errors import SystemError_
from hpcprof_kit.systems import System


@dataclass(frozen=True)
class SiteModule:
    """One module of a site: its name (``name/version`` when pinned), what it provides, and
    the folder ``module use`` must add before it is visible ('' when none)."""

    name: str
    provides: tuple[str, ...]
    use: str = ""
    default: bool = False  # loaded in every login shell (the site's default environment)

    @property
    def family(self) -> str:
        """The name without its version: ``frameworks/2025.3.1`` -> ``frameworks``."""
        return self.name.split("/", 1)[0]


def site_modules(system: System) -> tuple[SiteModule, ...]:
    """The ``[[modules]]`` entries of ``system`` (empty for a system without modules)."""
    out = []
    for i, entry in enumerate(system.extra.get("modules", [])):
        try:
            out.append(
                SiteModule(
                    name=str(entry["name"]),
                    provides=tuple(entry.get("provides", [])),
                    use=str(entry.get("use", "")),
                    default=bool(entry.get("default", False)),
                )
            )
        except (KeyError, TypeError):
            raise SystemError_(
                f"modules entry {i} of {system.source or system.name} needs a name and a "
                'provides list, e.g. {name = "pti-gpu", provides = ["unitrace"]}'
            ) from None
    return tuple(out)


def module_for(system: System, tool: str) -> SiteModule | None:
    """The module that provides ``tool`` on ``system`` (None when no listed module does)."""
    return next((m for m in site_modules(system) if tool in m.provides), None)
