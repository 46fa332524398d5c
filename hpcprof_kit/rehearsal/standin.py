"""The twin's stand-in programs, one entry point: ``python -m hpcprof_kit.rehearsal.standin
--twin ROOT TOOL ARGS...``. The twin's ``bin/`` and module folders hold small scripts that call
it. Each stand-in behaves at the boundary as the real program does (the flags it takes, what it
refuses, the files it leaves) and says in its messages that it is a stand-in.

TOOL is one of: ``modulecmd`` (Lmod's ``module``), ``mpiexec`` (Cray PALS), ``rank`` (PALS's
per-rank start), ``qsub``/``qstat``/``qdel``/``pbs_rstat``/``pbs-run`` (PBS Pro), ``unitrace``,
``nsys``, ``ncu``, ``xpu-smi``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path

from hpcprof_kit.rehearsal.twin import TAG, Twin


# ---- Lmod's module command -----------------------------------------------------------------
def _lmod_unknown(name: str) -> str:
    return (
        "Lmod has detected the following error:  The following module(s) are unknown: "
        f'"{name}"\n\n'
        'Please check the spelling or version number. Also try "module spider ..."\n'
        "It is also possible your cache file is out-of-date; it may help to try:\n"
        f'  $ module --ignore_cache load "{name}"\n'
        f"{TAG} stand-in for Lmod: this site offers only the modules of its system record\n"
    )


def _find_module(twin: Twin, name: str, modulepath: list[str]) -> dict | None:
    for m in twin.config["modules"]:
        family = m["name"].split("/", 1)[0]
        if name in (m["name"], family) and (not m["use"] or m["use"] in modulepath):
            return m
    return None


def _conda_function(site_python: str) -> str:
    return (
        'conda() { case "$1" in '
        f"activate) export CONDA_PREFIX={shlex.quote(str(Path(site_python).parent))} "
        'CONDA_DEFAULT_ENV="${2:-base}";; '
        "deactivate) unset CONDA_PREFIX CONDA_DEFAULT_ENV;; "
        f'*) echo "conda {TAG}: only activate and deactivate are modelled" >&2; return 1;; '
        "esac; }"
    )


def modulecmd(twin: Twin, args: list[str]) -> int:
    """Print shell code for ``eval`` (Lmod's contract); errors go to stderr, code ``false``."""
    shell, sub, names = args[0], (args[1:2] or ["list"])[0], args[2:]
    del shell
    loaded = [m for m in os.environ.get("LOADEDMODULES", "").split(":") if m]
    modulepath = [p for p in os.environ.get("MODULEPATH", "").split(":") if p]
    path = os.environ.get("PATH", "")
    out: list[str] = []
    if sub == "use":
        modulepath = names + modulepath
        out.append(f"export MODULEPATH={shlex.quote(':'.join(modulepath))}")
        twin.log("module", action="use", names=names, ok=True)
    elif sub in ("load", "add"):
        for name in names:
            found = _find_module(twin, name, modulepath)
            if found is None:
                sys.stderr.write(_lmod_unknown(name))
                twin.log("module", action="load", name=name, ok=False)
                print("false")
                return 1
            folder = twin.tool_folder(found["name"])
            if "python" in found["provides"]:
                folder = Path(twin.config["site_python"])
            if "conda" in found["provides"]:
                out.append(_conda_function(twin.config["site_python"]))
            path = f"{folder}:{path}"
            loaded.append(found["name"])
            twin.log("module", action="load", name=name, ok=True, provides=found["provides"])
        out.append(f"export PATH={shlex.quote(path)}")
        out.append(f"export LOADEDMODULES={shlex.quote(':'.join(loaded))}")
    elif sub == "avail":
        names_ = [m["name"] for m in twin.config["modules"]]
        sys.stderr.write(f"{TAG} modules of this site: {' '.join(names_)}\n")
    elif sub == "list":
        sys.stderr.write(f"Currently Loaded Modules: {' '.join(loaded) or '(none)'}\n")
    elif sub in ("unload", "purge"):
        kept = [] if sub == "purge" else [m for m in loaded if m.split("/")[0] not in names]
        out.append(f"export LOADEDMODULES={shlex.quote(':'.join(kept))}")
    else:
        sys.stderr.write(f"{TAG} module {sub}: not modelled by the stand-in; ignored\n")
    print("\n".join(out))
    return 0


# ---- vendor tools --------------------------------------------------------------------------
VALUE_OPTIONS = {
    "nsys": {"-o", "--output", "-t", "--trace", "-c", "--capture-range", "--stats",
             "--show-output", "--sample", "--cpuctxsw", "-f", "--force-overwrite"},
    "ncu": {"-o", "--export", "--set", "-k", "--kernel-name", "-c", "--launch-count",
            "--launch-skip", "--profile-from-start"},
    "unitrace": {"--output-dir-path", "--output", "-o"},
}  # fmt: skip


# What `nsys --version` and `ncu --version` print, in each tool's own layout (the numbers are
# the stand-in's, not a site's).
VERSION_TEXT = {
    "nsys": f"NVIDIA Nsight Systems version 2024.5.1.113-standin ({TAG})",
    "ncu": "NVIDIA (R) Nsight Compute Command Line Profiler\nCopyright (c) 2018-2024 NVIDIA "
           f"Corporation\nVersion 2024.3.2.0 (build standin) ({TAG})",
}  # fmt: skip


def _expand_q(text: str) -> str:
    """nsys/ncu's ``%q{VAR}``: the value of VAR in the tool's environment."""
    return re.sub(r"%q\{(\w+)\}", lambda m: os.environ.get(m.group(1), ""), text)


def _split_options(tool: str, args: list[str]) -> tuple[dict[str, str], list[str]]:
    options: dict[str, str] = {}
    i = 0
    while i < len(args) and args[i].startswith("-"):
        key, eq, value = args[i].partition("=")
        if eq:
            options[key] = value
            i += 1
        elif key in VALUE_OPTIONS.get(tool, set()) and i + 1 < len(args):
            options[key] = args[i + 1]
            i += 2
        else:
            options[key] = ""
            i += 1
    return options, args[i:]


def _unitrace_trace(rank: int, pid: int, start_us: float, end_us: float, argv: list[str]) -> dict:
    """A trace in unitrace's layout, holding only what the stand-in saw: the process's span."""
    host = socket.gethostname()
    return {
        "traceEvents": [
            {"ph": "M", "name": "process_name", "pid": pid, "tid": pid,
             "args": {"name": f"RANK {rank} HOST<{host}>"}},
            {"ph": "X", "cat": "cpu_op", "name": "rehearsal stand-in: " + " ".join(argv)[:120],
             "pid": pid, "tid": pid, "ts": start_us, "dur": max(end_us - start_us, 1.0),
             "args": {"note": "written by the unitrace stand-in; no GPU activity recorded"}},
        ]
    }  # fmt: skip


def vendor_tool(twin: Twin, tool: str, args: list[str]) -> int:
    """Run the command as the tool would, then leave the tool's output for this rank."""
    if args == ["--version"] and tool in VERSION_TEXT:
        print(VERSION_TEXT[tool])
        return 0
    if tool == "nsys":
        if not args or args[0] != "profile":
            print(f"nsys {TAG}: only 'nsys profile ...' is modelled", file=sys.stderr)
            return 2
        args = args[1:]
    options, command = _split_options(tool, args)
    if not command:
        print(f"{tool} {TAG}: no application to run", file=sys.stderr)
        return 2
    rank_text = os.environ.get("PMI_RANK", "0")
    rank = int(rank_text) if rank_text.isdigit() else 0
    # A capture range (nsys/ncu's CUDA profiler API, unitrace's conditional collection) opens
    # only where the app calls capture(): here the app records that region with torch.profiler.
    capture = bool(
        {"--capture-range", "--conditional-collection"} & set(options)
        or options.get("--profile-from-start") == "off"
    )
    env = {**os.environ, "HPCPROF_CAPTURE": "torch"} if capture else None
    start = time.time()
    done = subprocess.run(command, close_fds=False, env=env)  # PMI_FD must reach the app
    end = time.time()
    if tool == "unitrace":
        out_dir = Path(options.get("--output-dir-path", "."))
        out_dir.mkdir(parents=True, exist_ok=True)
        name = f"{Path(command[0]).name}.{os.getpid()}.{rank}.json"
        trace = _unitrace_trace(rank, os.getpid(), start * 1e6, end * 1e6, command)
        output = out_dir / name
        output.write_text(json.dumps(trace))
    else:
        stands_for = _expand_q(options.get("-o", options.get("--output", f"report_{rank}")))
        # Where the tool's report would be, with a suffix no trace reader takes for a trace.
        output = Path(f"{stands_for}.{tool}-rep.standin")
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps({
            "tool": tool, "rank": rank, "stands_for": stands_for, "options": options,
            "command": command, "TMPDIR": os.environ.get("TMPDIR", ""),
        }, indent=1))  # fmt: skip
    twin.log("tool", tool=tool, rank=rank, output=str(output), options=options, capture=capture,
             exit_code=done.returncode, itt=os.environ.get("HPCPROF_EMIT_ITT", ""))  # fmt: skip
    print(f"{tool} {TAG}: rank {rank} wrote {output}", file=sys.stderr)
    return done.returncode


def xpu_smi(twin: Twin, args: list[str]) -> int:
    twin.log("tool", tool="xpu-smi", args=args)
    print(f"xpu-smi {TAG}: no Intel GPU on this machine; the site would list 6 GPUs here")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) < 3 or argv[0] != "--twin":
        print("usage: python -m hpcprof_kit.rehearsal.standin --twin ROOT TOOL ARGS...",
              file=sys.stderr)  # fmt: skip
        return 2
    twin, tool, args = Twin.open(argv[1]), argv[2], argv[3:]
    if tool == "modulecmd":
        return modulecmd(twin, args)
    if tool in ("unitrace", "nsys", "ncu"):
        return vendor_tool(twin, tool, args)
    if tool == "xpu-smi":
        return xpu_smi(twin, args)
    if tool in ("mpiexec", "rank"):
        from hpcprof_kit.rehearsal import pals

        return pals.mpiexec(twin, args) if tool == "mpiexec" else pals.rank(twin, args)
    from hpcprof_kit.rehearsal import pbs, pbs_job_start

    handlers = {"qsub": pbs.qsub, "qstat": pbs.qstat, "qdel": pbs.qdel,
                "qhold": pbs.qhold, "qrls": pbs.qrls,
                "pbs_rstat": pbs.pbs_rstat, "pbsnodes": pbs.pbsnodes, "qmgr": pbs.qmgr,
                "pbs-run": pbs_job_start.run_job}  # fmt: skip
    if tool not in handlers:
        print(f"{TAG}: no stand-in named {tool!r}", file=sys.stderr)
        return 2
    return handlers[tool](twin, args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
