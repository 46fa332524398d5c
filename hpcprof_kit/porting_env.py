"""Device masks set inside the Python process: the port leaves them to a human.

The GPU runtime reads its device mask once, when it starts: Level Zero reads
``ZE_AFFINITY_MASK`` and ``ZE_FLAT_DEVICE_HIERARCHY``, CUDA reads ``CUDA_VISIBLE_DEVICES``.
``torch.xpu.device_count()`` enumerates the devices, so a mask set after it (or after any other
``torch.xpu`` call) can come too late and mask nothing. The ATPESC guide sets the masks in the job
script (``export ZE_AFFINITY_MASK="0"``, https://github.com/argonne-lcf/ATPESC_MachineLearning);
PyTorch on Aurora can also keep every device visible and call ``torch.xpu.set_device(local_rank)``.

:func:`flag_env_sets` finds ``os.environ[VAR] = ...``, ``os.environ.setdefault(VAR, ...)``,
``os.environ.update(...)`` and ``os.putenv(VAR, ...)`` for those variables, puts a comment above
each in the ported code and returns one "needs a human" row per line.

>>> from hpcprof_kit.porting import port_source
>>> result = port_source('import os, torch\\nn = torch.cuda.device_count()\\n'
...                      'os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"\\n')
>>> print(result.code.splitlines()[2])
# needs a human: set ZE_AFFINITY_MASK in the job script, before Python starts
>>> [(line, code) for line, code, _ in result.not_ported]
[(3, 'os.environ["ZE_AFFINITY_MASK"]')]
"""

from __future__ import annotations

# Read once by the GPU runtime when it starts.
RUNTIME_ONCE_VARS: tuple[str, ...] = (
    "ZE_AFFINITY_MASK",
    "ZE_FLAT_DEVICE_HIERARCHY",
    "CUDA_VISIBLE_DEVICES",
)
DEVICE_NAMESPACES: tuple[str, ...] = ("torch.cuda.", "torch.xpu.", "torch.accelerator.")
SETTERS: dict[str, str] = {  # call -> how it names the variable
    "os.environ.setdefault": "first", "environ.setdefault": "first",
    "os.putenv": "first", "putenv": "first",
    "os.environ.update": "keys", "environ.update": "keys",
}  # fmt: skip


def dotted_name(node) -> str | None:
    """``torch.cuda.device_count`` for that chain of names in the syntax tree, else None."""
    import libcst as cst

    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        base = dotted_name(node.value)
        return f"{base}.{node.attr.value}" if base else None
    return None


def _string(node) -> str | None:
    import libcst as cst

    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _names_set(stmt) -> list[tuple[str, str]]:
    """(variable, code naming it) for each runtime-once variable this statement sets."""
    import libcst as cst

    found: list[tuple[str, str]] = []
    code = cst.Module(body=[]).code_for_node
    for part in stmt.body:
        if isinstance(part, cst.Assign):
            for target in part.targets:
                t = target.target
                if isinstance(t, cst.Subscript) and dotted_name(t.value) in (
                    "os.environ",
                    "environ",
                ):
                    index = t.slice[0].slice if len(t.slice) == 1 else None
                    key = _string(index.value) if isinstance(index, cst.Index) else None
                    found += [(key, code(t))] if key in RUNTIME_ONCE_VARS else []
        call = part.value if isinstance(part, cst.Expr) else None
        how = SETTERS.get(dotted_name(call.func) or "") if isinstance(call, cst.Call) else None
        if how == "first" and call.args:
            key = _string(call.args[0].value)
            found += (
                [(key, f'{dotted_name(call.func)}("{key}", ...)')]
                if key in RUNTIME_ONCE_VARS
                else []
            )
        elif how == "keys":
            keys = [a.keyword.value for a in call.args if a.keyword is not None]
            for arg in (a for a in call.args if isinstance(a.value, cst.Dict)):
                keys += [
                    _string(e.key) for e in arg.value.elements if isinstance(e, cst.DictElement)
                ]
            found += [
                (k, f"{dotted_name(call.func)}({k}=...)") for k in keys if k in RUNTIME_ONCE_VARS
            ]
    return found


def _mask_name(var: str, target: str) -> str:
    """What the comment tells the reader to set in the job script."""
    if target == "agnostic" and var == "CUDA_VISIBLE_DEVICES":
        return "the device mask (ZE_AFFINITY_MASK on Intel GPUs, CUDA_VISIBLE_DEVICES on NVIDIA)"
    return "ZE_AFFINITY_MASK" if var == "CUDA_VISIBLE_DEVICES" else var


def _why(var: str, target: str, earlier: tuple[int, str] | None) -> str:
    when = (
        f"after {earlier[1]}() on line {earlier[0]} already enumerated the devices"
        if earlier
        else "before any device call in this file (too late if an import started the runtime)"
    )
    set_device = "torch.xpu.set_device" if target == "xpu" else "torch.accelerator.set_device_index"
    keep_all = (
        f", or keep every device visible and call {set_device}(local_rank)"
        if var != "ZE_FLAT_DEVICE_HIERARCHY"
        else ""
    )
    return (
        f"{var} set inside the process, {when}: the runtime reads it once, at start; set "
        f"{_mask_name(var, target)} in the job script (export, or mpiexec --env){keep_all}"
    )


def flag_env_sets(module, target: str):
    """(ported module with a comment above each in-process mask, rows for the port's report).

    Line numbers are those of the module given (the port calls this before it adds any line).
    """
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    rows: list[tuple[int, str, str]] = []

    class Flagger(cst.CSTTransformer):
        METADATA_DEPENDENCIES = (PositionProvider,)

        def __init__(self) -> None:
            super().__init__()
            self.first_device_call: tuple[int, str] | None = None

        def visit_Call(self, node) -> None:
            name = dotted_name(node.func) or ""
            if self.first_device_call is None and name.startswith(DEVICE_NAMESPACES):
                line = self.get_metadata(PositionProvider, node).start.line
                self.first_device_call = (line, name)

        def leave_SimpleStatementLine(self, original, updated):
            found = _names_set(original)
            if not found:
                return updated
            line = self.get_metadata(PositionProvider, original).start.line
            earlier = self.first_device_call
            earlier = earlier if earlier and earlier[0] <= line else None
            rows.extend((line, code, _why(var, target, earlier)) for var, code in found)
            mask = _mask_name(found[0][0], target)
            note = f"# needs a human: set {mask} in the job script, before Python starts"
            lead = cst.EmptyLine(comment=cst.Comment(note))
            return updated.with_changes(leading_lines=[*updated.leading_lines, lead])

    ported = MetadataWrapper(module).visit(Flagger())
    return ported, rows


__all__ = ["RUNTIME_ONCE_VARS", "flag_env_sets"]
