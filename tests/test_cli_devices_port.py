"""The ``hpcprof-kit devices`` and ``hpcprof-kit port`` commands, run as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KIT = [sys.executable, "-m", "hpcprof_kit"]


def _kit(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([*KIT, *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def test_devices_json_reports_cpu_on_this_machine(monkeypatch):
    done = _kit("devices", "--json")
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    assert (info["device_type"], info["count"]) == ("cpu", 1)
    row = info["devices"][0]
    assert row["type"] == "cpu" and row["compute_units"] >= 1 and row["memory_gib"] > 0


def test_port_prints_the_golden_diff_and_lists_leftovers():
    done = _kit("port", "examples/cuda_train_alcf_style.py", "--ipex", cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (REPO / "tests/golden/port/cuda_train_alcf_style.xpu.diff").read_text()
    assert "cuda_train_alcf_style.py:27: torch.backends.cudnn.benchmark" in done.stderr


def test_port_write_then_bad_file(tmp_path):
    script = tmp_path / "t.py"
    script.write_text("import torch\nprof_sort = 'self_cuda_time_total'\n")
    done = _kit("port", str(script), "--to", "agnostic", "--write")
    assert done.returncode == 0, done.stderr
    assert script.read_text() == "import torch\nprof_sort = 'self_device_time_total'\n"
    assert "original kept as" in done.stderr
    bad = tmp_path / "bad.py"
    bad.write_text("x = (\n")
    done = _kit("port", str(bad), "--write")
    assert done.returncode == 2 and "does not parse as Python" in done.stderr
    assert bad.read_text() == "x = (\n"
