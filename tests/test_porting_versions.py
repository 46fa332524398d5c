"""The port writes only what the target's torch has; the version table is checked against torch.

Runs in both CI legs: the main one (torch 2.13) and the site-torch one (torch 2.8, the oldest the
kit supports), so a claim of the table is proved on each side of the release it names.
"""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hpcprof_kit.errors import PortError, SystemError_
from hpcprof_kit.porting import (
    ACCELERATOR_NAMES,
    ADDED_IN,
    XPU_SAME_NAME,
    port_names,
    port_source,
)
from hpcprof_kit.porting_versions import release
from hpcprof_kit.systems import oldest_supported

REPO = Path(__file__).resolve().parents[1]
OLDEST = release(oldest_supported().torch)
# A script that uses every torch.cuda name the port's tables map.
EVERY_CUDA_NAME = "import torch\n" + "".join(
    f"x{i} = torch.cuda.{name}\n" for i, name in enumerate(sorted(set(ACCELERATOR_NAMES)))
)


def _installed() -> tuple[int, int]:
    import torch

    return release(torch.__version__)


def _exists(name: str) -> bool:
    module, attr = name.rsplit(".", 1)
    return hasattr(importlib.import_module(module), attr)


@pytest.mark.parametrize("name", sorted(ADDED_IN))
def test_the_table_says_what_the_installed_torch_has(name):
    added = release(ADDED_IN[name])
    if added <= _installed():
        assert _exists(name), f"{name}: the table says torch {ADDED_IN[name]}, it is missing"
    else:
        assert not _exists(name), f"{name}: the table says torch {ADDED_IN[name]}, it is here"


def test_every_name_the_port_may_write_is_in_the_table_or_in_every_supported_torch():
    # not in the table: in every supported torch, so here too
    assert [n for n in port_names() if n not in ADDED_IN and not _exists(n)] == []


@pytest.mark.parametrize("target", ["xpu", "agnostic"])
def test_what_the_port_writes_for_the_oldest_torch_exists_in_it(target):
    src = EVERY_CUDA_NAME + "".join(f"y = torch.cuda.{n}()\n" for n in sorted(XPU_SAME_NAME))
    src += "dist.init_process_group('nccl')\nwith torch.cuda.amp.autocast(): pass\n"
    code = port_source(src, target).code
    written = set(re.findall(r"\btorch(?:\.\w+)+", code)) - {"torch.cuda.amp"}
    written = {n for n in written if not n.startswith("torch.cuda.")}  # left for a human
    assert written, code
    too_new = [n for n in written if n in ADDED_IN and release(ADDED_IN[n]) > OLDEST]
    assert too_new == []
    if _installed() == OLDEST:  # the site-torch leg: torch itself says so
        assert sorted(n for n in written if not _exists(n)) == []


def test_names_the_oldest_torch_lacks_are_spelled_for_it_or_listed_with_their_line():
    result = port_source(EVERY_CUDA_NAME, "agnostic")
    assert result.torch_version == oldest_supported().torch
    flagged = {line: why for line, _, why in result.not_ported}
    for line, name in enumerate(sorted(set(ACCELERATOR_NAMES)), start=2):
        accel = f"torch.accelerator.{ACCELERATOR_NAMES[name]}"
        if release(ADDED_IN.get(accel, "0.0")) > OLDEST:
            # not called: no spelling runs on the CPU too, so a human decides
            assert f"has no {ACCELERATOR_NAMES[name]!r} before torch" in flagged[line]
        else:
            assert line not in flagged and accel in result.code.splitlines()[line - 1]


def test_a_newer_target_gets_torch_accelerator_names():
    code = port_source("import torch\nm = torch.cuda.max_memory_allocated()\n", "agnostic",
                       torch_version="2.9").code  # fmt: skip
    assert "m = torch.accelerator.max_memory_allocated()" in code.splitlines()


def test_the_agnostic_port_of_max_memory_allocated_runs_on_this_torch(tmp_path):
    script = tmp_path / "peak.py"
    script.write_text(
        "import torch\n"
        "torch.cuda.reset_peak_memory_stats()\n"
        "x = torch.ones(256).cuda() * 2\n"
        "torch.cuda.empty_cache()\n"
        "print(f'peak {torch.cuda.max_memory_allocated() / 2**20:.1f} MiB', x.device.type)\n"
    )
    result = port_source(script.read_text(), "agnostic", filename="peak.py")
    assert result.not_ported == [] and "max_memory_allocated" in result.code
    ported = tmp_path / "peak_ported.py"
    ported.write_text(result.code)
    done = subprocess.run(
        [sys.executable, str(ported)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "peak 0.0 MiB cpu"


def test_a_target_older_than_the_kit_supports_is_refused_with_the_fix():
    with pytest.raises(PortError) as info:
        port_source("x = 1\n", "agnostic", torch_version="2.5")
    message = str(info.value)
    assert "torch_version (--torch) '2.5'" in message
    assert f"oldest torch the kit supports anywhere: {oldest_supported().torch}" in message
    assert f"pass --torch {oldest_supported().torch} or newer" in message
    with pytest.raises(PortError, match=r"'two\.eight' is not a torch release"):
        port_source("x = 1\n", torch_version="two.eight")


def test_the_site_record_sets_the_default_target():
    assert port_source("x = 1\n", "xpu", system="aurora").torch_version == "2.8"
    assert port_source("x = 1\n", "agnostic", system="polaris").torch_version == "2.8"
    with pytest.raises(SystemError_, match="'nowhere' is unknown"):
        port_source("x = 1\n", system="nowhere")


def test_the_oldest_supported_versions_match_the_records_pyproject_and_readme():
    assert (oldest_supported("aurora").torch, oldest_supported("aurora").python) == ("2.8", "3.10")
    assert oldest_supported("polaris").source == "conda/2025-09-25"
    assert oldest_supported("slurm") == oldest_supported()  # no stack named: the kit's oldest
    oldest = oldest_supported()
    pyproject = (REPO / "pyproject.toml").read_text()
    assert f'requires-python = ">={oldest.python}"' in pyproject
    readme = (REPO / "README.md").read_text()
    assert f"torch {oldest.torch}" in readme and f"Python {oldest.python}" in readme


def test_cli_refuses_an_old_target_and_names_the_field(tmp_path):
    script = tmp_path / "t.py"
    script.write_text("import torch\nm = torch.cuda.max_memory_allocated()\n")
    kit = [sys.executable, "-m", "hpcprof_kit", "port", str(script), "--to", "agnostic"]
    done = subprocess.run([*kit, "--torch", "2.4"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "torch_version (--torch) '2.4'" in done.stderr
    done = subprocess.run([*kit, "--torch", "2.9"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "+m = torch.accelerator.max_memory_allocated()" in done.stdout
    assert "(torch 2.9)" in done.stderr
