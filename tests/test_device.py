"""Device detection, properties, local devices and the IPEX fallback."""

from __future__ import annotations

import re
import sys
import types

import pytest

from hpcprof_kit import device
from hpcprof_kit.errors import DeviceError


def test_this_machine_detects_the_device_torch_sees(monkeypatch):
    # the CPU on the laptop and in CI; cuda on a GPU node (checked on an H100: docs/gpu-check.md)
    import torch

    monkeypatch.delenv("HPCPROF_DEVICE", raising=False)
    xpu = hasattr(torch, "xpu") and torch.xpu.is_available()
    if xpu or torch.cuda.is_available():
        kind = "xpu" if xpu else "cuda"
        assert device.detect() == kind
        assert device.device_count() == getattr(torch, kind).device_count() >= 1
    else:
        assert device.detect() == "cpu" and device.device_count() == 1


def test_override_by_environment_and_bad_value_names_the_variable(monkeypatch):
    monkeypatch.setenv("HPCPROF_DEVICE", "XPU")
    assert device.detect() == "xpu"
    assert device.device_count() == 0  # no Intel GPU here: nothing to count
    monkeypatch.setenv("HPCPROF_DEVICE", "gpu")
    with pytest.raises(
        DeviceError,
        match=r"device type 'gpu' \(from the HPCPROF_DEVICE\) is unknown; use one of xpu, cuda, mps, cpu",
    ):
        device.detect()


def test_cpu_properties_row_has_the_documented_columns():
    (row,) = device.properties("cpu")
    assert set(row) == {"index", "type", "name", "memory_gib", "compute_units", "driver"}
    assert row["driver"].startswith("torch 2.") and row["compute_units"] >= 1


def test_local_device_beyond_the_count_names_count_and_fix(monkeypatch):
    with pytest.raises(
        DeviceError,
        match=r"asks for xpu:3 but this process sees no xpu device \(torch.xpu.is_available\(\) is False\)",
    ):
        device.local_device(3, "xpu")
    # Two visible GPUs and local rank 3: the count and the mask variable are named.
    monkeypatch.setattr(device, "device_count", lambda kind=None: 2)
    with pytest.raises(
        DeviceError,
        match=r"local rank 3 asks for cuda:3 but this process sees 2 cuda device\(s\) \(indices 0-1\); start at most 2 ranks per node.*CUDA_VISIBLE_DEVICES",
    ):
        device.local_device(3, "cuda")
    assert str(device.local_device(5, "cpu")) == "cpu"


def test_hierarchy_notes_say_12_vs_6_devices(monkeypatch):
    monkeypatch.delenv("ZE_FLAT_DEVICE_HIERARCHY", raising=False)
    assert device.hierarchy() == "FLAT" and "12 devices" in device.HIERARCHY_NOTES["FLAT"]
    monkeypatch.setenv("ZE_FLAT_DEVICE_HIERARCHY", "composite")
    assert device.hierarchy() == "COMPOSITE" and "6 devices" in device.HIERARCHY_NOTES["COMPOSITE"]


def test_topology_is_none_without_the_vendor_tool():
    assert device.topology("cpu") is None
    assert device.topology("xpu") is None  # no xpu-smi on this machine


def _model():
    import torch

    model = torch.nn.Linear(3, 3)
    return model, torch.optim.SGD(model.parameters(), lr=0.1)


def test_optimize_on_cpu_leaves_everything_unchanged():
    model, opt = _model()
    m2, o2, note = device.optimize(model, opt, "cpu")
    assert m2 is model and o2 is opt and note == "stock PyTorch on cpu: IPEX is only used on XPU"


def test_optimize_falls_back_cleanly_standin_broken_ipex(tmp_path, monkeypatch):
    # A stand-in for IPEX 2.8 under torch 2.13: the package raises while importing.
    pkg = tmp_path / "intel_extension_for_pytorch"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "import intel_extension_for_pytorch._core\n"
        "raise RuntimeError('Intel Extension for PyTorch needs PyTorch 2.8.*, found 2.13.0')\n"
    )
    (pkg / "_core.py").write_text("LOADED = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    model, opt = _model()
    m2, o2, note = device.optimize(model, opt, "xpu")
    assert m2 is model and o2 is opt
    assert note == ("stock torch.xpu: intel-extension-for-pytorch failed to import "
                    "(RuntimeError: Intel Extension for PyTorch needs PyTorch 2.8.*, found 2.13.0)")  # fmt: skip
    assert not [m for m in sys.modules if m.startswith("intel_extension_for_pytorch")]


def test_optimize_uses_ipex_when_it_works_standin_working_ipex(tmp_path, monkeypatch):
    pkg = tmp_path / "intel_extension_for_pytorch"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "__version__ = '9.9'\n"
        "def optimize(model, optimizer=None):\n"
        "    model.ipex_optimized = True\n"
        "    return model, optimizer\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "intel_extension_for_pytorch", raising=False)
    model, opt = _model()
    try:
        m2, _, note = device.optimize(model, opt, "xpu")
    finally:
        sys.modules.pop("intel_extension_for_pytorch", None)
    assert m2.ipex_optimized and note == (
        "intel-extension-for-pytorch 9.9: ipex.optimize applied on xpu (the model in place; "
        "0 of 1 modules replaced; the optimizer's step unchanged)"
    )


def test_name_mapping_is_data():
    assert device.CUDA_TO_XPU["nccl"] == "xccl"
    assert device.CUDA_TO_XPU["CUDA_VISIBLE_DEVICES"] == "ZE_AFFINITY_MASK"


def test_xpu_smi_runs_after_its_module_as_the_guide_does(monkeypatch):
    # the ATPESC guide: "module load xpu-smi" then "xpu-smi topology -m"
    lmod = {"LMOD_CMD": "/usr/share/lmod/lmod/libexec/lmod"}
    assert device.topology_command("xpu", env=lmod) == [
        "bash", "-lc", "module load xpu-smi && xpu-smi topology -m"]  # fmt: skip
    # no module system: the tool alone when it is on PATH, else nothing
    assert device.topology_command("xpu", env={}, which=lambda _: "/x") == [
        "xpu-smi", "topology", "-m"]  # fmt: skip
    assert device.topology_command("xpu", env={}, which=lambda _: None) is None
    assert device.topology_command("cuda", env=lmod, which=lambda _: "/x") == [
        "nvidia-smi", "topo", "-m"]  # fmt: skip


def test_the_module_is_the_one_the_aurora_record_lists():
    from hpcprof_kit.systems import load_system
    from hpcprof_kit.systems.modules import module_for

    assert module_for(load_system("aurora"), "xpu-smi").name == device.TOPOLOGY_MODULES["xpu"]


def test_topology_loads_the_module_in_a_login_shell_first(tmp_path, monkeypatch):
    # A stand-in site: `module load` (defined by the login profile) puts xpu-smi on PATH.
    (tmp_path / "bin").mkdir()
    tool = tmp_path / "bin" / "xpu-smi"
    tool.write_text('#!/bin/sh\necho "GPU 0/0  S  XL*"\n')
    tool.chmod(0o755)
    (tmp_path / ".bash_profile").write_text(
        'module() { echo "module $*" >> "$HOME/modules.log"; PATH="$HOME/bin:$PATH"; }\n'
    )
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("MODULESHOME", str(tmp_path))
    assert device.topology("xpu") == "GPU 0/0  S  XL*\n"
    assert (tmp_path / "modules.log").read_text() == "module load xpu-smi\n"


# unitrace's options, from its README (github.com/intel/pti-gpu/tree/master/tools/unitrace).
UNITRACE_METRIC_OPTIONS = {"--metric-query", "--metric-sampling", "--group", "--stall-sampling"}
UNITRACE_TIMELINE_OPTIONS = {"--device-timing", "--host-timing", "--chrome-*-logging"}


def test_xpu_compute_units_are_eus_and_xe_cores_come_from_the_subslice_count(monkeypatch):
    # The properties the ATPESC guide prints for one Aurora tile (FLAT mode).
    tile = types.SimpleNamespace(
        name="Intel(R) Data Center GPU Max 1550", total_memory=64 * 2**30,
        max_compute_units=448, gpu_eu_count=448, gpu_subslice_count=56,
        driver_version="1.6.32567+19",
    )  # fmt: skip
    fake = types.SimpleNamespace(xpu=types.SimpleNamespace(get_device_properties=lambda i: tile))
    monkeypatch.setattr(device, "_torch", lambda: fake)
    monkeypatch.setenv("ZE_FLAT_DEVICE_HIERARCHY", "FLAT")
    row = device._accelerator_row("xpu", 0)
    assert (row["compute_units"], row["xe_cores"]) == (448, 56)
    assert row["compute_units"] == row["xe_cores"] * 8  # 8 EUs per Xe core
    assert device.COMPUTE_UNITS["xpu"].startswith("EUs (execution units")
    assert device.COMPUTE_UNITS["cuda"].startswith("SMs")


def test_name_map_says_what_an_xe_core_is_and_which_unitrace_options_replace_ncu():
    names = device.CUDA_TO_XPU
    assert "compute unit" not in " ".join(names.values())  # torch's compute units are EUs
    assert names["SM (multi_processor_count)"] == "Xe core (gpu_subslice_count; 8 EUs each)"
    ncu_options = set(re.findall(r"--[\w*-]+", names["ncu (per-kernel metrics)"]))
    assert ncu_options and ncu_options <= UNITRACE_METRIC_OPTIONS
    nsys_options = set(re.findall(r"--[\w*-]+", names["nsys (timeline)"]))
    assert nsys_options and nsys_options <= UNITRACE_TIMELINE_OPTIONS
