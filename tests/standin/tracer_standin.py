"""A stand-in for unitrace, nsys and ncu (not installable here): records which rank it wrapped.

Called as ``tracer_standin.py <tool> <the tool's own arguments...> <command...>``. It parses the
options the kit's wrappers pass, expands ``%q{VAR}`` the way nsys/ncu do, writes
``<output folder>/standin-<tool>-rank<PMI_RANK>.json`` (argv, output name, TMPDIR,
HPCPROF_EMIT_ITT) and then execs the command, as the real tools run it.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

# Options that take a value, per tool (everything else starting with "-" is a flag).
VALUE_OPTIONS = {
    "nsys": {"-o", "--output", "-t", "--trace"},
    "ncu": {"-o", "--export", "--set", "-k", "--kernel-name"},
    "unitrace": {"--output-dir-path", "--output", "-o"},
}


def expand(text: str) -> str:
    return re.sub(r"%q\{(\w+)\}", lambda m: os.environ.get(m.group(1), ""), text)


def main(argv: list[str]) -> int:
    tool, args = argv[0], argv[1:]
    if tool == "nsys":
        if not args or args[0] != "profile":
            print("standin nsys: expected 'nsys profile ...'", file=sys.stderr)
            return 2
        args = args[1:]
    options: dict[str, str] = {}
    i = 0
    while i < len(args) and args[i].startswith("-"):
        if args[i] in VALUE_OPTIONS[tool]:
            options[args[i]] = args[i + 1]
            i += 2
        else:
            options[args[i]] = ""
            i += 1
    command = args[i:]
    if not command:
        print(f"standin {tool}: no command to run", file=sys.stderr)
        return 2
    if tool == "unitrace":
        out_dir = Path(options["--output-dir-path"])
        output = options.get("--output", "")
    else:
        output = expand(options["-o"])
        out_dir = Path(output).parent
    out_dir.mkdir(parents=True, exist_ok=True)
    rank = os.environ.get("PMI_RANK", "?")
    record = {
        "tool": tool,
        "rank": int(rank) if rank.isdigit() else rank,
        "options": options,
        "output": output,
        "command": command,
        "TMPDIR": os.environ.get("TMPDIR", ""),
        "HPCPROF_EMIT_ITT": os.environ.get("HPCPROF_EMIT_ITT", ""),
    }
    (out_dir / f"standin-{tool}-rank{rank}.json").write_text(json.dumps(record, indent=1))
    sys.stdout.flush()
    os.execvp(command[0], command)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
