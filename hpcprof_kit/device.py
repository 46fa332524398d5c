"""Which accelerator is here, how many, their properties, and the CUDA<->XPU names.

One code path for CPU, CUDA and XPU: code asks :func:`detect` and :func:`local_device` instead
of branching on host names.

>>> detect("cpu")
'cpu'
>>> local_device(0, "cpu")
device(type='cpu')
>>> CUDA_TO_XPU["ProfilerActivity.CUDA"]
'ProfilerActivity.XPU'
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from typing import Any

from hpcprof_kit.errors import DeviceError

DEVICE_TYPES: tuple[str, ...] = ("xpu", "cuda", "mps", "cpu")
OVERRIDE_VAR = "HPCPROF_DEVICE"

# The same idea under its CUDA name and its XPU name (used by notebooks and by porting).
CUDA_TO_XPU: dict[str, str] = {
    "torch.cuda": "torch.xpu",
    "torch.cuda.is_available()": "torch.xpu.is_available()",
    "torch.cuda.device_count()": "torch.xpu.device_count()",
    "torch.cuda.set_device(i)": "torch.xpu.set_device(i)",
    "torch.cuda.synchronize()": "torch.xpu.synchronize()",
    '"cuda:0"': '"xpu:0"',
    ".cuda()": '.to("xpu")',
    "nccl": "xccl",
    "ProfilerActivity.CUDA": "ProfilerActivity.XPU",
    "self_cuda_time_total": "self_xpu_time_total",
    "CUDA_VISIBLE_DEVICES": "ZE_AFFINITY_MASK",
    "nvidia-smi topo -m": "xpu-smi topology -m",
    "SM (multi_processor_count)": "Xe core (gpu_subslice_count; 8 EUs each)",
    "nsys (timeline)": "unitrace --chrome-*-logging --device-timing",
    "ncu (per-kernel metrics)": "unitrace --metric-query --group GROUP, --stall-sampling",
}

# What ``compute_units`` in :func:`properties` counts, per device type. On an Intel GPU torch's
# ``max_compute_units`` is the EU count (``gpu_eu_count``): execution units, which Intel's newer
# documents call Xe vector engines, 8 per Xe core. An Aurora tile prints max_compute_units=448,
# gpu_eu_count=448, gpu_subslice_count=56 (the ATPESC guide's output): 56 Xe cores x 8 EUs.
COMPUTE_UNITS: dict[str, str] = {
    "cuda": "SMs (streaming multiprocessors)",
    "xpu": "EUs (execution units, also called Xe vector engines; 8 per Xe core)",
    "mps": "not reported",
    "cpu": "CPU cores this process may run on",
}

# What the Level Zero device hierarchy means for the number of torch devices on a node.
HIERARCHY_NOTES: dict[str, str] = {
    "FLAT": "FLAT: every GPU tile is its own torch device (Aurora: 6 GPUs x 2 tiles = 12 devices)",
    "COMPOSITE": "COMPOSITE: one torch device per GPU, tiles hidden inside (Aurora: 6 devices)",
    "COMBINED": "COMBINED: tiles as devices to Level Zero, whole GPUs to SYCL/torch",
}

# The command that prints the GPU-to-GPU / GPU-to-CPU link matrix, per device type.
TOPOLOGY_COMMANDS: dict[str, list[str]] = {
    "xpu": ["xpu-smi", "topology", "-m"],
    "cuda": ["nvidia-smi", "topo", "-m"],
}
# The module each tool needs first, as the ATPESC guide runs it ("module load xpu-smi", then
# "xpu-smi topology -m"; aurora.toml lists the same module). nvidia-smi comes with the driver.
TOPOLOGY_MODULES: dict[str, str] = {"xpu": "xpu-smi"}
MODULE_SYSTEM_VARS = (
    "LMOD_CMD",
    "MODULESHOME",
)  # set where `module` works (Lmod, Environment Modules)


def _torch():
    import torch

    return torch


def _available(kind: str) -> bool:
    torch = _torch()
    if kind == "cpu":
        return True
    if kind == "mps":
        backend = getattr(torch.backends, "mps", None)
        return bool(backend and backend.is_available())
    module = getattr(torch, kind, None)
    return bool(module is not None and module.is_available())


def detect(override: str | None = None) -> str:
    """The device type to use: argument, then ``$HPCPROF_DEVICE``, then probing xpu/cuda/mps.

    >>> detect("cuda") if False else detect("cpu")
    'cpu'
    """
    chosen = override or os.environ.get(OVERRIDE_VAR) or None
    if chosen is not None:
        chosen = chosen.strip().lower()
        if chosen not in DEVICE_TYPES:
            where = "argument" if override else OVERRIDE_VAR
            raise DeviceError(
                f"device type {chosen!r} (from the {where}) is unknown; use one of "
                f"{', '.join(DEVICE_TYPES)}, or leave it unset to detect"
            )
        return chosen
    return next(kind for kind in DEVICE_TYPES if _available(kind))


def device_count(kind: str | None = None) -> int:
    """How many devices of this type torch sees (1 for the CPU).

    >>> device_count("cpu")
    1
    """
    kind = detect(kind)
    if kind in ("cpu", "mps"):
        return 1
    if not _available(kind):
        return 0
    return int(getattr(_torch(), kind).device_count())


def hierarchy() -> str:
    """The Level Zero device hierarchy in effect (``ZE_FLAT_DEVICE_HIERARCHY``, default FLAT)."""
    return os.environ.get("ZE_FLAT_DEVICE_HIERARCHY", "FLAT").upper()


def _cpu_row() -> dict[str, Any]:
    name = platform.processor() or platform.machine()
    memory = 0
    try:
        with open("/proc/cpuinfo") as fh:
            name = next(
                (ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), name
            )
        with open("/proc/meminfo") as fh:
            kib = next(int(ln.split()[1]) for ln in fh if ln.startswith("MemTotal"))
            memory = kib * 1024
    except (OSError, StopIteration, ValueError):
        pass  # not Linux: keep what platform knows
    return {
        "index": 0,
        "type": "cpu",
        "name": name,
        "memory_gib": round(memory / 2**30, 1),
        "compute_units": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "driver": f"torch {_torch().__version__}",
    }


def _accelerator_row(kind: str, index: int) -> dict[str, Any]:
    props = getattr(_torch(), kind).get_device_properties(index)
    row: dict[str, Any] = {
        "index": index,
        "type": kind,
        "name": props.name,
        "memory_gib": round(props.total_memory / 2**30, 1),
    }
    if kind == "cuda":
        row["compute_units"] = props.multi_processor_count  # SMs
        row["driver"] = f"CUDA {_torch().version.cuda}"
    else:
        row["compute_units"] = getattr(props, "max_compute_units", None)  # EUs, not Xe cores
        row["xe_cores"] = getattr(props, "gpu_subslice_count", None)  # a subslice is an Xe core
        row["driver"] = getattr(props, "driver_version", "")
        row["hierarchy"] = hierarchy()
        row["hierarchy_note"] = HIERARCHY_NOTES.get(hierarchy(), "")
    return row


def properties(kind: str | None = None) -> list[dict[str, Any]]:
    """One row per device: index, type, name, memory_gib, compute_units, driver (+ xe_cores and
    hierarchy on XPU). ``compute_units`` counts what :data:`COMPUTE_UNITS` says: SMs on NVIDIA,
    EUs on Intel GPUs (448 for an Aurora tile: 56 Xe cores of 8 EUs), cores on a CPU.

    >>> properties("cpu")[0]["type"]
    'cpu'
    """
    kind = detect(kind)
    if kind == "cpu":
        return [_cpu_row()]
    if kind == "mps":
        return [{"index": 0, "type": "mps", "name": "Apple GPU", "memory_gib": None,
                 "compute_units": None, "driver": f"torch {_torch().__version__}"}]  # fmt: skip
    return [_accelerator_row(kind, i) for i in range(device_count(kind))]


def topology_command(
    kind: str, env: dict[str, str] | None = None, which=shutil.which
) -> list[str] | None:
    """The command line :func:`topology` runs for ``kind``: the tool after ``module load`` of its
    module where a module system is set up (a login shell defines ``module``), else the tool
    alone when it is on PATH, else None.

    >>> topology_command("xpu", env={"LMOD_CMD": "/usr/share/lmod/lmod/libexec/lmod"})
    ['bash', '-lc', 'module load xpu-smi && xpu-smi topology -m']
    >>> topology_command("cpu") is None
    True
    """
    command = TOPOLOGY_COMMANDS.get(kind)
    if command is None:
        return None
    env = os.environ if env is None else env
    module = TOPOLOGY_MODULES.get(kind)
    if module and any(env.get(var) for var in MODULE_SYSTEM_VARS):
        return ["bash", "-lc", f"module load {module} && {' '.join(command)}"]
    return command if which(command[0]) is not None else None


def topology(kind: str | None = None) -> str | None:
    """The node's GPU link matrix from ``xpu-smi topology -m`` (after ``module load xpu-smi``) /
    ``nvidia-smi topo -m``, else None.

    >>> topology("cpu") is None
    True
    """
    command = topology_command(detect(kind))
    if command is None:
        return None
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def local_device(local_rank: int, kind: str | None = None):
    """The torch.device for this local rank: ``xpu:<local_rank>``, ``cuda:<local_rank>`` or cpu.

    >>> local_device(1, "cpu")
    device(type='cpu')
    """
    torch = _torch()
    kind = detect(kind)
    if kind in ("cpu", "mps"):
        return torch.device(kind)
    count = device_count(kind)
    if count == 0:
        raise DeviceError(
            f"local rank {local_rank} asks for {kind}:{local_rank} but this process sees no {kind} "
            f"device (torch.{kind}.is_available() is False); load the GPU driver/module, or unset "
            f"{OVERRIDE_VAR} / pass another device type"
        )
    if not 0 <= local_rank < count:
        mask = "ZE_AFFINITY_MASK" if kind == "xpu" else "CUDA_VISIBLE_DEVICES"
        raise DeviceError(
            f"local rank {local_rank} asks for {kind}:{local_rank} but this process sees "
            f"{count} {kind} device(s) (indices 0-{count - 1}); start at most {count} ranks "
            f"per node, or check that {mask} does not hide devices"
        )
    return torch.device(kind, local_rank)


def set_current(dev) -> None:
    """Make ``dev`` the current device of its type (a no-op for the CPU)."""
    if dev.type in ("cuda", "xpu"):
        getattr(_torch(), dev.type).set_device(dev)


def _import_ipex():
    """(module, None) when intel-extension-for-pytorch imports cleanly, else (None, reason).
    Its import noise (kernel overrides, "No CUDA runtime") goes to a log, not to the learner
    (:mod:`hpcprof_kit.ipex_import`)."""
    from hpcprof_kit.ipex_import import quiet_import

    before = set(sys.modules)
    try:
        ipex = quiet_import("intel_extension_for_pytorch")
    except BaseException as exc:  # noqa: BLE001 - IPEX can fail with anything, even on exit paths
        if isinstance(exc, KeyboardInterrupt):
            raise
        for name in set(sys.modules) - before:  # no half-imported module left behind
            if name.startswith("intel_extension_for_pytorch"):
                del sys.modules[name]
        first = str(exc).splitlines()[0] if str(exc) else ""
        return None, f"intel-extension-for-pytorch failed to import ({type(exc).__name__}: {first})"
    return ipex, None


def _what_ipex_did(model, new_model, new_opt) -> str:
    """What ``ipex.optimize`` changed, in words: the model copied or not, modules replaced, and
    whether the optimizer's step is now IPEX's own (its fused step)."""
    before = {name: type(m) for name, m in model.named_modules()}
    replaced = sum(1 for name, m in new_model.named_modules() if before.get(name) is not type(m))
    step = getattr(new_opt, "step", None)
    owner = getattr(step, "__module__", "") or ""
    return "; ".join(
        [
            "the model in place" if new_model is model else "a copy of the model",
            f"{replaced} of {len(before)} modules replaced",
            f"the optimizer's step is IPEX's {step.__name__}"
            if owner.startswith("intel_extension_for_pytorch")
            else "the optimizer's step unchanged",
        ]
    )


def optimize(model, optimizer, device: str | None = None, *, on_cpu: bool = False):
    """(model, optimizer, note): IPEX's ``optimize`` when it imports and works on XPU (and, with
    ``on_cpu=True``, on the CPU: IPEX's CPU build optimizes there too), else unchanged. The note
    says which path was taken and what IPEX changed.

    >>> import torch
    >>> m = torch.nn.Linear(2, 2); opt = torch.optim.SGD(m.parameters(), lr=0.1)
    >>> m2, opt2, note = optimize(m, opt, "cpu")
    >>> m2 is m, note
    (True, 'stock PyTorch on cpu: IPEX is only used on XPU')
    """
    kind = detect(device)
    if kind != "xpu" and not (on_cpu and kind == "cpu"):
        return model, optimizer, f"stock PyTorch on {kind}: IPEX is only used on XPU"
    stock = "stock torch.xpu" if kind == "xpu" else "stock PyTorch on cpu"
    ipex, reason = _import_ipex()
    if ipex is None:
        return model, optimizer, f"{stock}: {reason}"
    try:
        new_model, new_opt = ipex.optimize(model, optimizer=optimizer)
    except Exception as exc:  # IPEX present but unusable with this torch/device
        return model, optimizer, f"{stock}: ipex.optimize failed ({type(exc).__name__}: {exc})"
    version = getattr(ipex, "__version__", "?")
    what = _what_ipex_did(model, new_model, new_opt)
    return (
        new_model,
        new_opt,
        f"intel-extension-for-pytorch {version}: ipex.optimize applied on {kind} ({what})",
    )


__all__ = [
    "COMPUTE_UNITS", "CUDA_TO_XPU", "DEVICE_TYPES", "HIERARCHY_NOTES", "detect", "device_count",
    "hierarchy", "local_device", "optimize", "properties", "set_current", "topology", "topology_command",
]  # fmt: skip
