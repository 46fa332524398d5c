"""The site twin: a folder that stands in for a site's login and compute nodes on this machine.

It holds what a batch job on Aurora or Polaris meets at the boundary, built from the system
record: a scratch ``HOME`` whose login profile defines ``module`` (as Lmod does) and puts the
default programming environment on PATH; stand-ins for PBS Pro's clients (``qsub``, ``qstat``,
``qdel``, ``pbs_rstat``) and Cray PALS ``mpiexec``; the site modules of the record, each
providing its twin (a site Python with torch and mpi4py but without the kit; the tracers'
stand-ins); and the venv a site recipe would build on top of the site Python, holding the kit.
Every stand-in appends what it did to ``log.jsonl``, which the rehearsal reads back.

Nothing here touches the real ``$HOME`` or the caller's environment.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import sysconfig
import venv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import hpcprof_kit
from hpcprof_kit.doctor import find_mpiexec
from hpcprof_kit.errors import SpecError
from hpcprof_kit.systems import System
from hpcprof_kit.systems.modules import site_modules

CONFIG = "twin.json"
LOG = "log.jsonl"
# Stand-in programs on the twin's default PATH (login and compute nodes alike).
CLIENTS = ("qsub", "qstat", "qdel", "qhold", "qrls", "pbs_rstat", "pbsnodes", "qmgr", "mpiexec")
DEFAULT_PATH = "/usr/bin:/bin"  # what a PBS Pro job starts with (no -V): the system default
TAG = "[site twin]"  # how every stand-in of the twin names itself in what it prints


@dataclass(frozen=True)
class Twin:
    """A built twin: its folder and its configuration (``twin.json``)."""

    root: Path
    config: dict[str, Any]

    @classmethod
    def open(cls, root: str | os.PathLike[str]) -> Twin:
        root = Path(root)
        return cls(root, json.loads((root / CONFIG).read_text()))

    def record(self) -> System:
        """The system record the twin's server enforces. Found in the twin's own records
        folder, set only while it loads: a stand-in that changed its environment would hand
        the variable on to the ranks it starts, and a real PBS job inherits no variables."""
        from hpcprof_kit.systems import load_system

        folder = self.config.get("systems_dir", "")
        before = os.environ.get("HPCPROF_SYSTEMS_DIR")
        if folder:
            os.environ["HPCPROF_SYSTEMS_DIR"] = folder
        try:
            return load_system(self.config["system"])
        finally:
            if before is None:
                os.environ.pop("HPCPROF_SYSTEMS_DIR", None)
            else:
                os.environ["HPCPROF_SYSTEMS_DIR"] = before

    @property
    def server_down(self) -> bool:
        """Whether the twin's PBS server is stopped (``set_server_down``)."""
        return bool(self.config.get("server_down"))

    def set_server_down(self, down: bool) -> None:
        """Stop (True) or restart (False) the twin's PBS server. While it is down its clients
        fail as real ones did (``qdel``: exit 162, ``Connection refused``) and the jobs already
        running carry on under their MoM; ``twin.json`` is replaced whole, so a client reading
        it meanwhile sees the old or the new state, never half of it."""
        self.config["server_down"] = down
        self._write_config()

    @property
    def scheduling(self) -> bool:
        """Whether the twin's scheduler starts queued jobs (PBS's server attribute
        ``scheduling``; on unless ``set_scheduling(False)``)."""
        return self.config.get("scheduling", True) is not False

    def set_scheduling(self, on: bool) -> None:
        """Turn the twin's scheduler on or off, as ``qmgr -c 'set server scheduling=False'``
        does: while it is off a submitted job stays queued (``Q``), so a test can hold it,
        delete it or read it before it could start."""
        self.config["scheduling"] = on
        self._write_config()

    def _write_config(self) -> None:
        tmp = self.root / f".{CONFIG}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(self.config, indent=1))
        os.replace(tmp, self.root / CONFIG)

    @property
    def server(self) -> dict[str, Any] | None:
        """A generic PBS server's own configuration (``build_generic``); None for a twin of a
        system record (Aurora, Polaris), whose queues the record gives."""
        return self.config.get("server")

    # ---- places ------------------------------------------------------------------------
    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def log_path(self) -> Path:
        return self.root / LOG

    @property
    def kit_venv(self) -> Path:
        """The site venv with the kit (where the record's ``default_venv`` points here)."""
        return Path(self.config["kit_venv"])

    @property
    def hosts(self) -> list[str]:
        return list(self.config["hosts"])

    # ---- the log ---------------------------------------------------------------------------
    def log(self, event: str, **fields: Any) -> None:
        """Append one event (a single small write: lines of concurrent ranks never mix)."""
        line = json.dumps({"event": event, "pid": os.getpid(), **fields}) + "\n"
        fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def events(self, event: str | None = None) -> list[dict[str, Any]]:
        if not self.log_path.exists():
            return []
        rows = [json.loads(line) for line in self.log_path.read_text().splitlines() if line]
        return [r for r in rows if event is None or r["event"] == event]

    # ---- environments ----------------------------------------------------------------------
    def module_function(self) -> str:
        """The ``module`` shell function, as Lmod defines it in a login shell."""
        return (
            '() {  eval "$('
            + " ".join(shlex.quote(w) for w in self.standin_argv("modulecmd"))
            + ' bash "$@")"; }'
        )

    def tool_folder(self, module: str) -> Path:
        """Where the programs a module provides lie (its PATH entry once loaded)."""
        return self.root / "tools" / module.replace("/", "_")

    def standin_argv(self, tool: str) -> list[str]:
        return [self.config["kit_python"], "-m", "hpcprof_kit.rehearsal.standin",
                "--twin", str(self.root), tool]  # fmt: skip

    def login_env(self, **extra: str) -> dict[str, str]:
        """The environment of an attendee's shell on the twin's login node, venv active."""
        env = {
            "HOME": str(self.home),
            "USER": self.config["user"],
            "LOGNAME": self.config["user"],
            "SHELL": "/bin/bash",
            "LANG": "C.UTF-8",
            "PATH": f"{self.kit_venv / 'bin'}:{self.bin}:{DEFAULT_PATH}",
            "VIRTUAL_ENV": str(self.kit_venv),
            "BASH_FUNC_module%%": self.module_function(),
            "KINETO_LOG_LEVEL": "6",
            "HPCPROF_SYSTEM": self.config["system"],
        }
        if self.config.get("systems_dir"):  # a site described by a record of its own
            env["HPCPROF_SYSTEMS_DIR"] = self.config["systems_dir"]
        env.update(extra)
        return env


def _user() -> str:
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except (ImportError, KeyError):
        return "attendee"


def _link_site_packages(target: Path, with_kit: bool) -> None:
    """Fill ``target``'s site-packages with links to this environment's packages (the kit's
    own entries left out unless ``with_kit``), and its lib/ with the MPI library beside them."""
    purelib = Path(sysconfig.get_paths()["purelib"])
    dst = next((target / "lib").glob("python3*/site-packages"))
    for entry in purelib.iterdir():
        if entry.name.startswith(("hpcprof_kit", "__editable__", "__editable___hpcprof")):
            continue
        if not (dst / entry.name).exists():
            (dst / entry.name).symlink_to(entry)
    if with_kit:
        (dst / "hpcprof_kit").symlink_to(Path(hpcprof_kit.__file__).resolve().parent)
    # mpi4py looks for libmpi in <prefix>/lib: the site's MPI library (here the mpich wheel's).
    for entry in (Path(sys.prefix) / "lib").iterdir():
        if not entry.name.startswith("python") and not (target / "lib" / entry.name).exists():
            (target / "lib" / entry.name).symlink_to(entry)


def _python_env(path: Path, with_kit: bool) -> Path:
    venv.EnvBuilder(with_pip=False, symlinks=True, clear=True).create(path)
    _link_site_packages(path, with_kit)
    return path


def _kit_venv_path(home: Path, system: System) -> Path:
    default = str(system.extra.get("default_venv", ""))
    for prefix in ("$HOME/", "${HOME}/", "~/"):
        if default.startswith(prefix):
            return home / default[len(prefix) :]
    return home / "venvs" / f"hpcprof-kit-{system.name}"


def _write_program(path: Path, argv: list[str]) -> None:
    path.write_text("#!/bin/sh\nexec " + " ".join(shlex.quote(w) for w in argv) + ' "$@"\n')
    path.chmod(0o755)


def build(
    root: str | os.PathLike[str],
    system: System,
    *,
    nodes: int = 1,
    modules_missing: tuple[str, ...] = (),
    reservations: dict[str, dict[str, Any]] | None = None,
    interactive_queue: str = "",
    job_history: bool = True,
    kill_grace_s: float = 10.0,
) -> Twin:
    """Build a twin of ``system`` under ``root`` (which must not exist yet).

    ``modules_missing`` leaves modules out of the twin's module system (to rehearse a site
    where one was renamed); ``reservations`` maps reservation queue names to their limits
    (``{"R123": {"nodes": 2, "walltime": "02:00:00"}}``); ``interactive_queue`` makes the twin
    hold an interactive job (``qsub -I``) of the attendee in that queue; ``job_history``
    False makes its PBS keep no finished jobs (OpenPBS's default; ALCF keeps them);
    ``kill_grace_s`` is the time between a killed job's SIGTERM and its SIGKILL (PBS's
    ``kill_delay``). Vendor tools are
    stand-ins, even where the real nsys is installed: without a GPU it records little, a CUDA
    capture range never opens, and its leftover agents stalled later runs here.
    """
    if system.scheduler != "pbs" or system.launcher != "pals":
        raise SpecError(
            f"system {system.name!r} uses {system.scheduler}/{system.launcher}; the rehearsal "
            "models PBS Pro with Cray PALS (aurora, polaris): pick one of those"
        )
    hydra = find_mpiexec()
    if hydra is None:
        raise SpecError(
            "the rehearsal starts ranks with Hydra mpiexec underneath its PALS stand-in, and "
            "none is found; 'make env' installs it (the mpich wheel)"
        )
    root = Path(root).resolve()
    root.mkdir(parents=True)
    home = root / "home"
    for sub in ("home", "bin", "tools", "pbs/jobs", "tmp"):
        (root / sub).mkdir(parents=True)
    site = _python_env(root / "site", with_kit=False)
    kit_venv = _kit_venv_path(home, system)
    kit_venv.parent.mkdir(parents=True, exist_ok=True)
    _python_env(kit_venv, with_kit=True)
    python_module = next((m.name for m in site_modules(system) if "python" in m.provides), "")
    (kit_venv / "hpcprof-site-module").write_text(python_module + "\n")  # as site_venv writes
    pattern = str(system.extra.get("node_names") or system.name + "-node{}")
    config = {
        "system": system.name,
        "systems_dir": os.environ.get("HPCPROF_SYSTEMS_DIR", ""),
        "root": str(root),
        "user": _user(),
        "kit_python": sys.executable,
        "hydra": hydra,
        "site_python": str(site / "bin"),
        "kit_venv": str(kit_venv),
        "hosts": [pattern.format(i) for i in range(nodes)],
        "modules": [
            {"name": m.name, "provides": list(m.provides), "use": m.use, "default": m.default}
            for m in site_modules(system)
            if m.name not in modules_missing and m.family not in modules_missing
        ],
        "reservations": reservations or {},
        "job_history": job_history,
        "kill_grace_s": kill_grace_s,
        "interactive": {"id": f"4000.{system.name}-pbs-twin", "queue": interactive_queue}
        if interactive_queue
        else None,
    }
    twin = Twin(root, config)
    (root / CONFIG).write_text(json.dumps(config, indent=1))
    for client in CLIENTS:
        _write_program(twin.bin / client, twin.standin_argv(client))
    for module in config["modules"]:
        tools = twin.tool_folder(module["name"])
        tools.mkdir(parents=True)
        for tool in module["provides"]:
            if tool in ("python", "conda"):
                continue
            _write_program(tools / tool, twin.standin_argv(tool))
    defaults = [m["name"] for m in config["modules"] if m["default"]]
    default_path = "".join(f"{twin.tool_folder(name)}:" for name in defaults)
    (home / ".bash_profile").write_text(
        "# The twin's login profile: what Lmod and the site's default modules give a login shell.\n"
        f"module {twin.module_function()}\n"
        "export -f module\n"
        f'export PATH="{default_path}{twin.bin}:$PATH"\n'
        f"export LOADEDMODULES={shlex.quote(':'.join(defaults))}\n"
    )
    twin.log("twin", system=system.name, root=str(root))
    return twin


def build_generic(
    root: str | os.PathLike[str],
    name: str,
    queues: dict[str, dict[str, Any]],
    *,
    default_queue: str = "",
    cores: int = 2,
    job_history: bool = False,
    kill_grace_s: float = 10.0,
    stage_delay_s: float = 0.0,
    exclusive_nodes: bool = False,
    refused_uids: tuple[int, ...] = (),
) -> Twin:
    """Build a twin of a small generic PBS cluster under ``root`` (which must not exist yet).

    Unlike ``build``, no system record describes it: the server holds its own ``queues``
    (``{"workq": {"max_nodes": 1, "max_walltime": "00:30:00", "max_queued": 1}}``; ``max_queued``
    is the jobs one user may have queued, OpenPBS's ``[u:PBS_GENERIC=N]``), has no custom
    resource (a ``filesystems`` request is refused as unknown), no account rule, job history
    off unless ``job_history``, and one node with ``cores`` cores: this machine, on which the
    real Hydra ``mpiexec`` starts the ranks; ``stage_delay_s``: how long an ended job shows
    its start's comment and no output files before PBS stages them (see ``run_job``);
    ``exclusive_nodes``: each job takes the node whole, so a second one waits ("Not Running:
    Not enough free nodes available") while another runs; ``refused_uids``: the users whose
    jobs its qsub refuses, "Bad UID for job execution" (exit 175), as a real OpenPBS server
    refuses root's (none by default: the tests may run as root). Its ``qstat -Qf``,
    ``pbsnodes -av`` and ``qmgr -c 'p s'`` answer as OpenPBS does, so ``hpcprof-kit site
    init`` can write its record.
    The user's environment (a venv with the kit) lies in the twin's ``HOME``.
    """
    import socket

    hydra = find_mpiexec()
    if hydra is None:
        raise SpecError("the generic twin starts ranks with Hydra mpiexec, and none is found; "
                        "'make env' installs it (the mpich wheel)")  # fmt: skip
    root = Path(root).resolve()
    root.mkdir(parents=True)
    home = root / "home"
    for sub in ("home", "bin", "tools", "pbs/jobs", "tmp"):
        (root / sub).mkdir(parents=True)
    kit_venv = home / "venvs" / "hpcprof-kit"
    kit_venv.parent.mkdir(parents=True)
    _python_env(kit_venv, with_kit=True)
    config = {
        "system": name, "systems_dir": "", "root": str(root), "user": _user(),
        "kit_python": sys.executable, "hydra": hydra, "site_python": "",
        "kit_venv": str(kit_venv), "hosts": [socket.gethostname()], "modules": [],
        "reservations": {}, "job_history": job_history, "kill_grace_s": kill_grace_s,
        "stage_delay_s": stage_delay_s, "interactive": None, "refused_uids": list(refused_uids),
        "server": {"name": name, "default_queue": default_queue or next(iter(queues)),
                   "queues": queues, "cores": cores, "job_history": job_history,
                   "resources": [], "exclusive_nodes": exclusive_nodes},
    }  # fmt: skip
    twin = Twin(root, config)
    (root / CONFIG).write_text(json.dumps(config, indent=1))
    for client in CLIENTS:
        if client != "mpiexec":
            _write_program(twin.bin / client, twin.standin_argv(client))
    _write_program(twin.bin / "mpiexec", [hydra])  # the real launcher, not a stand-in
    (home / ".bash_profile").write_text(
        "# The twin's login profile: the PBS clients on PATH, as a site's profile puts them.\n"
        f'export PATH="{twin.bin}:$PATH"\n'
    )
    twin.log("twin", system=name, root=str(root), generic=True)
    return twin
