"""The CUDA->XPU code changes, made on the syntax tree and shown as a unified diff.

Rewrites keep comments and formatting (libcst). ``to="xpu"`` names Intel GPUs explicitly;
``to="agnostic"`` uses ``torch.accelerator`` and a ``device_type`` variable so the same file runs
on CPU, CUDA and XPU. What cannot be ported is listed with its line number, never guessed:
CUDA-only switches, and device masks set inside the process (:mod:`hpcprof_kit.porting_env`).

>>> result = port_source('x = torch.randn(4).cuda()\\nif torch.cuda.is_available(): pass\\n')
>>> print(result.code, end="")
x = torch.randn(4).to("xpu")
if torch.xpu.is_available(): pass
>>> result.changed_lines
[1, 2]
"""

from __future__ import annotations

import ast
import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path

from hpcprof_kit.errors import PortError
from hpcprof_kit.porting_env import dotted_name as _dotted
from hpcprof_kit.porting_env import flag_env_sets
from hpcprof_kit.porting_versions import (
    ADDED_IN,
    FALLBACK_MODULE,
    ON_CPU,
    missing_in,
    target_release,
)

TARGETS: tuple[str, ...] = ("xpu", "agnostic")

# torch.cuda names that torch.xpu has under the same name (checked against torch by a test).
XPU_SAME_NAME: frozenset[str] = frozenset(
    {
        "current_device", "current_stream", "device", "device_count", "empty_cache",
        "get_device_capability", "get_device_name", "get_device_properties", "get_rng_state",
        "init", "is_available", "is_bf16_supported", "is_initialized", "manual_seed",
        "manual_seed_all", "max_memory_allocated", "max_memory_reserved", "mem_get_info",
        "memory_allocated", "memory_reserved", "memory_stats", "reset_peak_memory_stats", "seed",
        "set_device", "set_rng_state", "set_stream", "stream", "synchronize", "Event", "Stream",
    }
)  # fmt: skip
# torch.cuda names with a device-agnostic twin in torch.accelerator.
ACCELERATOR_NAMES: dict[str, str] = {
    "is_available": "is_available", "device_count": "device_count", "synchronize": "synchronize",
    "set_device": "set_device_index", "current_device": "current_device_index",
    "current_stream": "current_stream", "empty_cache": "empty_cache",
    "memory_allocated": "memory_allocated", "max_memory_allocated": "max_memory_allocated",
    "reset_peak_memory_stats": "reset_peak_memory_stats",
}  # fmt: skip
# torch.cuda.amp calls and their device-generic form (the device type goes first).
AMP_CALLS: dict[str, str] = {
    "torch.cuda.amp.autocast": "torch.autocast",
    "torch.cuda.amp.GradScaler": "torch.amp.GradScaler",
}
# Why some CUDA-only names have no one-to-one replacement (shown to the learner).
NOT_PORTABLE_HINTS: dict[str, str] = {
    "torch.cuda.amp": 'use torch.autocast("xpu") / torch.amp.GradScaler("xpu") by hand',
    "torch.cuda.nvtx": "use torch.profiler.record_function (ITT ranges under unitrace)",
    "torch.backends.cudnn": "oneDNN has no cudnn switches; drop the line or guard it",
}
# String constants whose XPU (and agnostic) spelling is fixed.
STRING_MAP: dict[str, tuple[str, str]] = {
    "nccl": ("xccl", "xccl"),  # agnostic: see AGNOSTIC_BACKEND
    "self_cuda_time_total": ("self_xpu_time_total", "self_device_time_total"),
    "cuda_time_total": ("xpu_time_total", "device_time_total"),
    "CUDA_VISIBLE_DEVICES": ("ZE_AFFINITY_MASK", "CUDA_VISIBLE_DEVICES"),
}
DEVICE_STRING = re.compile(r"^cuda(:\d+)?$")
AGNOSTIC_PRELUDE = (
    "device_type = torch.accelerator.current_accelerator().type "
    'if torch.accelerator.is_available() else "cpu"\n'
)
AGNOSTIC_BACKEND = "torch.distributed.get_default_backend_for_device(device_type)"
IPEX_IMPORT = "import intel_extension_for_pytorch as ipex  # optional: older XPU stacks\n"
IPEX_OPTIMIZE = "model, optimizer = ipex.optimize(model, optimizer=optimizer)\n"
# The ATPESC guide's step 4: "Convert model and loss criterion to xpu" (criterion.to(device)).
CRITERION = "criterion"


@dataclass
class PortResult:
    """The ported code, its diff against the original, and what was left for a human."""

    original: str
    code: str
    target: str
    filename: str = "<string>"
    torch_version: str = ""  # the torch release the port wrote for, "2.8"
    changed_lines: list[int] = field(default_factory=list)
    not_ported: list[tuple[int, str, str]] = field(default_factory=list)  # (line, code, why)
    # lines wrong on every device, CUDA or not: the port leaves them as they are
    broken: list[tuple[int, str, str]] = field(default_factory=list)  # (line, code, why)

    def diff(self) -> str:
        """Unified diff, original -> ported (empty when nothing changed)."""
        return "".join(
            difflib.unified_diff(
                self.original.splitlines(keepends=True),
                self.code.splitlines(keepends=True),
                fromfile=f"a/{self.filename}",
                tofile=f"b/{self.filename}",
            )
        )

    def report(self) -> str:
        """The lines that still need a human, one per line with its number; then the lines
        wrong on any device, which no port changes."""
        if not self.not_ported:
            text = (
                f"{self.filename}: everything CUDA-specific was ported to {self.target} "
                f"(torch {self.torch_version})"
            )
        else:
            rows = [f"{self.filename}:{n}: {code}  -- {why}" for n, code, why in self.not_ported]
            text = "not ported (needs a human):\n" + "\n".join(rows)
        if self.broken:
            rows = [f"{self.filename}:{n}: {code}  -- {why}" for n, code, why in self.broken]
            text += "\nwrong on any device (no port changes it; fix it by hand):\n" + "\n".join(
                rows
            )
        return text


def broken_rendezvous(source: str) -> list[tuple[int, str, str]]:
    """Lines that set ``MASTER_ADDR`` from the rank's own host name: each rank names itself (or,
    where the others read the variable, finds it unset), so no rank learns rank 0's address.

    >>> src = 'import os, socket\\nos.environ["MASTER_ADDR"] = socket.gethostname()\\n'
    >>> [n for n, _, _ in broken_rendezvous(src)]
    [2]
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            key = target.slice if isinstance(target, ast.Subscript) else None
            if not (isinstance(key, ast.Constant) and key.value == "MASTER_ADDR"):
                continue
            if ast.unparse(target.value) not in ("os.environ", "environ"):
                continue
            calls = {ast.unparse(n.func).rsplit(".", 1)[-1]
                     for n in ast.walk(node.value) if isinstance(n, ast.Call)}  # fmt: skip
            if "gethostname" in calls or "getfqdn" in calls:
                found.append((node.lineno, 'os.environ["MASTER_ADDR"]',
                              "each rank sets MASTER_ADDR to its own host name, or reads it "
                              "where no launcher set it: rank 0's address reaches no other "
                              "rank; broadcast it from rank 0 (MPI's comm.bcast)"))  # fmt: skip
    return found


def _transformer(target: str, result: PortResult, torch_release: tuple[int, int]):
    import libcst as cst
    from libcst.metadata import PositionProvider

    agnostic = target == "agnostic"
    shown = result.torch_version

    def too_new(name: str) -> str | None:
        newer = missing_in(name, torch_release)
        if newer is None:
            return None
        module, attr = name.rsplit(".", 1)
        return f"{module} has no {attr!r} before torch {newer} (porting for torch {shown})"

    class CudaToXpu(cst.CSTTransformer):
        METADATA_DEPENDENCIES = (PositionProvider,)

        def __init__(self) -> None:
            super().__init__()
            self.used_device_type = False
            self.skip_depth = 0  # inside a chain already reported as not portable
            self.called: set[int] = set()  # the functions of calls (ids of their nodes)
            self.fallback: set[int] = set()  # calls spelled with FALLBACK_MODULE

        def _line(self, node) -> int:
            return self.get_metadata(PositionProvider, node).start.line

        def _changed(self, node) -> None:
            result.changed_lines.append(self._line(node))

        def _manual(self, node, why: str) -> None:
            code = cst.Module(body=[]).code_for_node(node)
            result.not_ported.append((self._line(node), code, why))

        def visit_Attribute(self, node) -> bool:
            name = _dotted(node)
            for prefix, hint in NOT_PORTABLE_HINTS.items():
                if name and (name == prefix or name.startswith(prefix + ".")):
                    if self.skip_depth == 0:
                        self._manual(node, hint)
                    self.skip_depth += 1
                    return False
            return True

        def leave_Attribute(self, original, updated):
            name = _dotted(original)
            if name and any(name == p or name.startswith(p + ".") for p in NOT_PORTABLE_HINTS):
                self.skip_depth -= 1
                return updated
            if name and name.startswith("torch.cuda.") and name.count(".") == 2:
                attr = original.attr.value
                if agnostic and attr in ACCELERATOR_NAMES:
                    new = f"torch.accelerator.{ACCELERATOR_NAMES[attr]}"
                    why = too_new(new)
                    if why and attr in ON_CPU and id(original) in self.called:
                        # the device's own module; leave_Call keeps the CPU out
                        self._changed(original)
                        self.used_device_type = True
                        self.fallback.add(id(original))
                        return cst.parse_expression(f"{FALLBACK_MODULE}.{attr}")
                    if why:
                        self._manual(original, f"{why}; call it on the device's module by hand")
                        return updated
                elif not agnostic and attr in XPU_SAME_NAME and not too_new(f"torch.xpu.{attr}"):
                    new = f"torch.xpu.{attr}"
                else:
                    self._manual(
                        original, f"torch.{'accelerator' if agnostic else 'xpu'} has no {attr!r}"
                    )
                    return updated
                self._changed(original)
                return cst.parse_expression(new)
            if name == "ProfilerActivity.CUDA" or (name or "").endswith(".ProfilerActivity.CUDA"):
                self._changed(original)
                if agnostic:
                    self.used_device_type = True
                    base = cst.Module(body=[]).code_for_node(original.value)
                    return cst.parse_expression(f"getattr({base}, device_type.upper())")
                return updated.with_changes(attr=cst.Name("XPU"))
            return updated

        def leave_ImportFrom(self, original, updated):
            if original.module is None or _dotted(original.module) != "torch.cuda":
                return updated
            names = [] if isinstance(original.names, cst.ImportStar) else original.names
            table = ACCELERATOR_NAMES if agnostic else {n: n for n in XPU_SAME_NAME}
            if not names or any(n.name.value not in table or n.asname for n in names):
                self._manual(original, "import from torch.xpu / torch.accelerator by hand")
                return updated
            new = "torch.accelerator" if agnostic else "torch.xpu"
            older = [too_new(f"{new}.{table[n.name.value]}") for n in names]
            if any(older):
                self._manual(original, next(w for w in older if w))
                return updated
            if agnostic and any(table[n.name.value] != n.name.value for n in names):
                self._manual(original, "torch.accelerator spells some names differently")
                return updated
            self._changed(original)
            return updated.with_changes(module=cst.parse_expression(new))

        def visit_Call(self, node) -> bool:
            self.called.add(id(node.func))
            # An amp call is rewritten whole in leave_Call; its parts are not "not portable".
            return _dotted(node.func) not in AMP_CALLS

        def leave_Call(self, original, updated):
            func = original.func
            if id(func) in self.fallback:
                # the CPU has no device memory: what torch.cuda's call returns without a GPU
                code = cst.Module(body=[]).code_for_node(updated)
                on_cpu = ON_CPU[func.attr.value]
                return cst.parse_expression(
                    f"({code} if torch.accelerator.is_available() else {on_cpu})"
                )
            amp = AMP_CALLS.get(_dotted(func) or "")
            if amp:
                self._changed(original)
                self.used_device_type |= agnostic
                first = cst.Name("device_type") if agnostic else cst.SimpleString('"xpu"')
                args = [cst.Arg(first), *original.args] if original.args else [cst.Arg(first)]
                if len(args) > 1:
                    args[0] = args[0].with_changes(
                        comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
                    )
                return updated.with_changes(func=cst.parse_expression(amp), args=args)
            if isinstance(func, cst.Attribute) and func.attr.value == "cuda":
                # .cuda(i, non_blocking=True) -> .to(torch.device("xpu", i), non_blocking=True)
                index = [
                    a for a in updated.args if a.keyword is None or a.keyword.value == "device"
                ]
                rest = [a for a in updated.args if a not in index]
                if len(index) > 1 or any(a.star for a in updated.args):
                    self._manual(
                        original, 'pass the device explicitly: .to(torch.device("xpu", i))'
                    )
                    return updated
                self._changed(original)
                self.used_device_type |= agnostic
                kind = "device_type" if agnostic else '"xpu"'
                if index:
                    code = cst.Module(body=[]).code_for_node(index[0].value)
                    device_arg = cst.parse_expression(f"torch.device({kind}, {code})")
                else:
                    device_arg = cst.parse_expression(kind)
                args = [cst.Arg(device_arg), *rest]
                if rest:
                    args[0] = args[0].with_changes(
                        comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
                    )
                    args[-1] = args[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                return updated.with_changes(
                    func=updated.func.with_changes(attr=cst.Name("to")), args=args
                )
            return updated

        def leave_SimpleString(self, original, updated):
            if original.prefix.lower() not in ("",):  # leave b"", r"" and friends alone
                return updated
            value = original.evaluated_value
            quote = original.quote
            if isinstance(value, str) and DEVICE_STRING.match(value):
                self._changed(original)
                if agnostic:
                    self.used_device_type = True
                    index = value[len("cuda") :]
                    return cst.parse_expression(
                        f'f"{{device_type}}{index}"' if index else "device_type"
                    )
                return cst.SimpleString(f"{quote}xpu{value[4:]}{quote}")
            if value == "nccl" and agnostic:
                self._changed(original)
                self.used_device_type = True
                return cst.parse_expression(AGNOSTIC_BACKEND)
            if value in STRING_MAP:
                new = STRING_MAP[value][1 if agnostic else 0]
                if new != value:
                    self._changed(original)
                    return cst.SimpleString(f"{quote}{new}{quote}")
            return updated

        def leave_FormattedStringText(self, original, updated):
            if original.value.startswith("cuda:") or original.value == "cuda":
                self._changed(original)
                if agnostic:
                    self.used_device_type = True
                    return updated.with_changes(value="{device_type}" + original.value[4:])
                return updated.with_changes(value="xpu" + original.value[4:])
            return updated

    return CudaToXpu()


def _is_import(stmt) -> bool:
    import libcst as cst

    return isinstance(stmt, cst.SimpleStatementLine) and all(
        isinstance(part, (cst.Import, cst.ImportFrom)) for part in stmt.body
    )


def _imports_torch(stmt) -> bool:
    """``import torch`` (alone, aliased or among others) as a top-level statement."""
    import libcst as cst
    from libcst.helpers import get_full_name_for_node

    parts = stmt.body if _is_import(stmt) else []
    return any(
        isinstance(p, cst.Import)
        and any(get_full_name_for_node(a.name) == "torch" for a in p.names)
        for p in parts
    )


def _assigns(stmt, name: str) -> bool:
    import libcst as cst

    parts = stmt.body if isinstance(stmt, cst.SimpleStatementLine) else []
    targets = [t.target for p in parts if isinstance(p, cst.Assign) for t in p.targets]
    return any(isinstance(t, cst.Name) and t.value == name for t in targets)


def _insert(module, after, text: str):
    """(module, True) with ``text`` inserted after the first top-level statement ``after`` matches."""
    import libcst as cst

    body = list(module.body)
    hits = [i for i, stmt in enumerate(body) if after(stmt)]
    if not hits:
        return module, False
    index = hits[-1] if after is _is_import else hits[0]
    body.insert(index + 1, cst.parse_statement(text))
    return module.with_changes(body=body), True


def _move_criterion(module, to: str):
    """(module, device) with ``criterion = criterion.to(device)`` after a top-level ``criterion =
    ...`` no line moves yet (your ``device`` variable, else the target's); device None: no move."""
    if re.search(rf"\b{CRITERION}\s*=\s*{CRITERION}\s*\.(to|cuda)\(", module.code):
        return module, None
    defined = [st for st in module.body if _assigns(st, CRITERION)]
    if not defined or re.search(r"\.(to|cuda)\(", module.code_for_node(defined[0])):
        return module, None
    has_device = any(_assigns(st, "device") for st in module.body)
    device = "device" if has_device else ('"xpu"' if to == "xpu" else "device_type")
    line = f"{CRITERION} = {CRITERION}.to({device})  # the loss on the device too\n"
    return _insert(module, lambda st: _assigns(st, CRITERION), line)[0], device


def port_source(
    source: str,
    to: str = "xpu",
    *,
    filename: str = "<string>",
    ipex: bool = False,
    torch_version: str | None = None,
    system: str | None = None,
) -> PortResult:
    """Port Python source text for a torch release; PortError when it does not parse.

    ``torch_version`` (default: the oldest ``system``'s record names, else the oldest the kit
    supports) decides each name's spelling: a name that release lacks gets the device's own
    module, or is listed for a human.

    >>> port_source("dist.init_process_group('nccl')").code
    "dist.init_process_group('xccl')"
    >>> port_source("torch.cuda.empty_cache()", "agnostic", torch_version="2.9").code.splitlines()[-1]
    'torch.accelerator.empty_cache()'
    """
    import libcst as cst
    from libcst.metadata import MetadataWrapper

    if to not in TARGETS:
        raise PortError(f"--to {to!r} is not a target; use one of {', '.join(TARGETS)}")
    torch_release = target_release(torch_version, system)
    try:
        ast.parse(source, filename=filename)  # CPython's parser gives the clearest location
        module = cst.parse_module(source)
    except (SyntaxError, cst.ParserSyntaxError) as exc:
        line = getattr(exc, "lineno", None) or getattr(exc, "editor_line", "?")
        why = getattr(exc, "msg", None) or getattr(exc, "message", exc)
        raise PortError(
            f"{filename} does not parse as Python (line {line}: {why}); fix the syntax "
            "first - nothing was written"
        ) from None
    result = PortResult(original=source, code=source, target=to, filename=filename)
    result.torch_version = f"{torch_release[0]}.{torch_release[1]}"
    transformer = _transformer(to, result, torch_release)
    ported = MetadataWrapper(module).visit(transformer)
    result.changed_lines = sorted(set(result.changed_lines))
    # before any line is added, so the rows keep the original line numbers
    ported, masks = flag_env_sets(ported, to)
    result.not_ported.extend(masks)
    ported, moved = _move_criterion(ported, to)
    if to == "agnostic" and (transformer.used_device_type or moved == "device_type"):
        ported, found = _insert(ported, _is_import, AGNOSTIC_PRELUDE)
        if not found:  # a snippet without imports: define what the rewrite uses at the top
            head = [cst.parse_statement("import torch\n"), cst.parse_statement(AGNOSTIC_PRELUDE)]
            ported = ported.with_changes(body=[*head, *ported.body])
    if ipex and to == "xpu":
        # right after `import torch` (the guide's order), else after the last import
        ported, found = _insert(ported, _imports_torch, IPEX_IMPORT)
        if not found:
            ported, _ = _insert(ported, _is_import, IPEX_IMPORT)
        ported, found = _insert(ported, lambda st: _assigns(st, "optimizer"), IPEX_OPTIMIZE)
        if not found:
            result.not_ported.append(
                (0, "ipex.optimize", "no top-level `optimizer = ...`; add it by hand")
            )
    result.not_ported.sort()
    result.broken = broken_rendezvous(source)
    code = ported.code
    result.code = code
    return result


def port_file(
    path: str | Path,
    to: str = "xpu",
    *,
    write: bool = False,
    ipex: bool = False,
    torch_version: str | None = None,
    system: str | None = None,
) -> PortResult:
    """Port a file; with ``write=True`` save the original as ``<file>.orig`` first, then rewrite it.

    Nothing is written when the file is not Python, does not parse, or the backup exists.
    """
    path = Path(path)
    if path.suffix != ".py":
        raise PortError(
            f"{path.name} is not a Python file (suffix {path.suffix or 'none'!r}); pass a .py file"
        )
    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PortError(
            f"{path} cannot be read as UTF-8 text ({exc}); pass a Python source file"
        ) from None
    result = port_source(
        source, to, filename=path.name, ipex=ipex, torch_version=torch_version, system=system
    )
    if write and result.code != source:
        backup = path.with_name(path.name + ".orig")
        if backup.exists():
            raise PortError(
                f"{backup.name} exists already (an earlier port); move it away first so the "
                "original is never lost - nothing was written"
            )
        backup.write_text(source, encoding="utf-8")
        path.write_text(result.code, encoding="utf-8")
    return result


def port_names() -> list[str]:
    """Every module attribute the port may write (checked against torch by the tests)."""
    names = {f"torch.xpu.{n}" for n in XPU_SAME_NAME}
    names |= {f"torch.accelerator.{n}" for n in ACCELERATOR_NAMES.values()}
    names |= set(AMP_CALLS.values())
    names |= set(re.findall(r"torch(?:\.\w+)+(?=\()", AGNOSTIC_PRELUDE + AGNOSTIC_BACKEND))
    names.add(FALLBACK_MODULE.split("(")[0])
    return sorted(names)


__all__ = ["ACCELERATOR_NAMES", "ADDED_IN", "PortResult", "TARGETS", "XPU_SAME_NAME",
           "port_file", "port_names", "port_source"]  # fmt: skip
