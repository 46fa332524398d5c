"""Which Python environment a job activates, and the script lines that do it.

A PBS Pro batch job starts from a clean login environment: nothing of the submitting shell
(its venv, its PATH) reaches it. So the script names the environment it was rendered from and
activates it after the site's modules. ``JobSpec.venv`` chooses it; when it is None the kit
takes the environment it runs from (a venv) when it runs on that site, else the system record's
``default_venv``: a script rendered on a laptop for Aurora must not name the laptop's venv.

>>> from hpcprof_kit.systems import load_system
>>> resolve_venv("/opt/v", load_system("aurora"))
'/opt/v'
>>> resolve_venv(None, load_system("local"))
''
>>> shell_path("$HOME/venvs/kit")
'"$HOME"/venvs/kit'
"""

from __future__ import annotations

import shlex
import sys
from typing import TYPE_CHECKING

from hpcprof_kit.systems import detect_system

if TYPE_CHECKING:
    from hpcprof_kit.systems import System


def running_venv() -> str:
    """The venv this Python runs from ('' when it is no venv)."""
    return sys.prefix if sys.prefix != sys.base_prefix else ""


def resolve_venv(venv: str | None, sysrec: System) -> str:
    """The environment a job on ``sysrec`` activates: ``venv`` (a spec's field) when given,
    else the default ('' = none: the local backend puts this interpreter first on PATH).

    The default is the running venv only on the site itself (``detect_system()`` names it:
    the site recipe and its Jupyter kernel set ``HPCPROF_SYSTEM``); rendered anywhere else, a
    site job names the environment the site recipe builds (the record's ``default_venv``).
    """
    if venv is not None:
        return venv
    if sysrec.scheduler == "none":
        return ""
    recipe_venv = str(sysrec.extra.get("default_venv", ""))
    if recipe_venv and detect_system() != sysrec.name:
        # rendered elsewhere (a laptop, CI): this machine's venv does not exist on the site
        return recipe_venv
    return site_default_venv(sysrec)


def site_default_venv(sysrec: System) -> str:
    """The venv a site job uses when none is named: the one running, else the record's."""
    return running_venv() or str(sysrec.extra.get("default_venv", ""))


def shell_path(path: str) -> str:
    """``path`` quoted for bash, with a leading ``$HOME/`` or ``~/`` left to the job to expand.

    >>> shell_path("~/venvs/kit"), shell_path("="), shell_path("a b")
    ('"$HOME"/venvs/kit', "'='", "'a b'")
    """
    for prefix in ("$HOME/", "${HOME}/", "~/"):
        if path.startswith(prefix):
            return '"$HOME"/' + _quoted(path[len(prefix) :])
    return _quoted(path)


def _quoted(text: str) -> str:
    """``shlex.quote``, which leaves ``=`` bare: after an assignment's ``=`` a bare one reads
    as ``==`` to a reader (shellcheck SC1097), so a value holding one is quoted too."""
    out = shlex.quote(text)
    return f"'{out}'" if out == text and "=" in text else out


def activation_lines(venv: str, system: str) -> list[str]:
    """The script lines that check and activate ``venv`` ([] when it is '')."""
    if not venv:
        return []
    return [
        f"HPCPROF_VENV={shell_path(venv)}",
        'if [[ ! -f "$HPCPROF_VENV/bin/activate" ]]; then',
        '    echo "hpcprof-kit: no Python environment at $HPCPROF_VENV (bin/activate is missing);'
        f" build it on a login node with env/{system}/setup.sh, or name yours with"
        ' JobSpec(venv=...)" >&2',
        "    exit 1",
        "fi",
        "# shellcheck disable=SC1091  # the environment exists only on the site",
        'source "$HPCPROF_VENV/bin/activate"',
    ]
