"""The CUDA->XPU port on the syntax tree: golden diffs, what is left over, bad input."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from hpcprof_kit.errors import PortError
from hpcprof_kit.porting import ACCELERATOR_NAMES, XPU_SAME_NAME, port_file, port_source

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "cuda_train_alcf_style.py"
GOLDEN = REPO / "tests" / "golden" / "port"
# What would still tie the code to NVIDIA: CUDA namespaces, device strings, NCCL, CUDA profiling.
CUDA_ONLY = re.compile(
    r"torch\.cuda\b|\.cuda\(|[\"']cuda(:\d+)?[\"']|f[\"']cuda:|\bnccl\b|ProfilerActivity\.CUDA|cuda_time_total"
)


@pytest.mark.parametrize(("target", "ipex"), [("xpu", True), ("agnostic", False)])
def test_alcf_style_script_matches_golden_diff_and_keeps_no_cuda_only_call(target, ipex):
    result = port_file(EXAMPLE, target, ipex=ipex)
    assert result.diff() == (GOLDEN / f"cuda_train_alcf_style.{target}.diff").read_text()
    ast.parse(result.code)  # still Python
    leftovers = [ln for ln in result.code.splitlines() if CUDA_ONLY.search(ln)]
    assert leftovers == []
    # What is left is listed with its line number, not silently kept: the in-process device
    # mask (line 22, after torch.cuda.device_count() on line 21) and the cuDNN switch.
    mask = "ZE_AFFINITY_MASK" if target == "xpu" else "CUDA_VISIBLE_DEVICES"
    assert [(line, code) for line, code, _ in result.not_ported] == [
        (22, f'os.environ["{mask}"]'),
        (27, "torch.backends.cudnn.benchmark"),
    ]
    # Comments survive the rewrite.
    assert "# fixed port: clashes when two jobs share a node" in result.code


def test_xpu_target_uses_stock_names_and_optional_ipex_lines():
    result = port_file(EXAMPLE, "xpu", ipex=True)
    lines = result.code.splitlines()
    assert (
        'dist.init_process_group(backend="xccl", init_method="env://", rank=RANK, world_size=SIZE)'
        in lines
    )
    # the IPEX import right after `import torch` (the guide's order)
    assert lines[lines.index("import torch") + 1].startswith("import intel_extension_for_pytorch")
    # ipex.optimize comes right after the optimizer and before the DDP wrap.
    opt = lines.index("optimizer = torch.optim.Adam(model.parameters(), lr=0.001 * SIZE)")
    assert lines[opt + 1] == "model, optimizer = ipex.optimize(model, optimizer=optimizer)"
    assert lines[opt + 2].startswith("model = DDP(")


def test_each_portable_name_exists_in_this_torch():
    import torch

    from hpcprof_kit.porting_versions import missing_in
    from hpcprof_kit.systems import release

    here = release(torch.__version__)
    assert sorted(n for n in XPU_SAME_NAME if not hasattr(torch.xpu, n)) == []
    # a name newer than this torch: tests/test_porting_versions.py checks it is absent
    assert (
        sorted(
            n
            for n in ACCELERATOR_NAMES.values()
            if not missing_in(f"torch.accelerator.{n}", here) and not hasattr(torch.accelerator, n)
        )
        == []
    )


def test_unknown_torch_cuda_api_is_listed_with_its_line():
    src = "import torch\n\nx = torch.cuda.nvtx.range_push('a')\ny = torch.cuda.ipc_collect()\n"
    result = port_source(src)
    assert [(line, code) for line, code, _ in result.not_ported] == [
        (3, "torch.cuda.nvtx.range_push"), (4, "torch.cuda.ipc_collect")]  # fmt: skip
    assert "torch.cuda.ipc_collect()" in result.code  # left as it was, for a human


def test_fstrings_and_cuda_with_index_or_keywords():
    result = port_source(
        'd = f"cuda:{r}"\nm.cuda(1)\nt = "cuda"\nx.cuda(non_blocking=True)\nx.cuda(*a)\n'
    )
    assert result.code == (
        'd = f"xpu:{r}"\nm.to(torch.device("xpu", 1))\nt = "xpu"\n'
        'x.to("xpu", non_blocking=True)\nx.cuda(*a)\n'
    )
    assert [line for line, _, _ in result.not_ported] == [5]


def test_agnostic_snippet_without_imports_gets_them():
    code = port_source("y = x.cuda()\n", "agnostic").code
    assert code.splitlines()[:2] == [
        "import torch",
        'device_type = torch.accelerator.current_accelerator().type if torch.accelerator.is_available() else "cpu"',
    ]


def test_agnostic_defines_device_type_after_the_imports_and_runs_here():
    src = "import torch\n\nx = torch.ones(2).cuda()\nok = torch.cuda.is_available()\n"
    code = port_source(src, "agnostic").code
    assert code.splitlines()[1].startswith("device_type = torch.accelerator.current_accelerator()")
    scope: dict = {}
    exec(compile(code, "ported", "exec"), scope)  # the ported code runs on this CPU machine
    assert scope["x"].device.type == scope["device_type"] == "cpu" and scope["ok"] is False


def test_not_python_does_not_parse_and_nothing_is_written(tmp_path):
    bad = tmp_path / "broken.py"
    bad.write_text("def f(:\n    x.cuda()\n")
    with pytest.raises(
        PortError, match=r"broken.py does not parse as Python \(line 1.*nothing was written"
    ):
        port_file(bad, write=True)
    assert (
        bad.read_text() == "def f(:\n    x.cuda()\n" and not (tmp_path / "broken.py.orig").exists()
    )
    notes = tmp_path / "notes.txt"
    notes.write_text("x.cuda()")
    with pytest.raises(PortError, match=r"notes.txt is not a Python file"):
        port_file(notes, write=True)


def test_write_keeps_the_original_and_refuses_to_overwrite_a_backup(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import torch\nx = torch.zeros(1).cuda()\n")
    port_file(script, write=True)
    assert script.read_text() == 'import torch\nx = torch.zeros(1).to("xpu")\n'
    assert (tmp_path / "train.py.orig").read_text() == "import torch\nx = torch.zeros(1).cuda()\n"
    script.write_text("y = 'cuda:0'\n")
    with pytest.raises(PortError, match=r"train.py.orig exists already"):
        port_file(script, write=True)
    assert script.read_text() == "y = 'cuda:0'\n"


def test_from_torch_cuda_imports_are_ported_or_listed():
    src = "from torch.cuda import synchronize, device_count\nfrom torch.cuda import nvtx\n"
    result = port_source(src)
    assert result.code.splitlines()[0] == "from torch.xpu import synchronize, device_count"
    assert [(line, code) for line, code, _ in result.not_ported] == [
        (2, "from torch.cuda import nvtx")
    ]


def test_criterion_goes_to_the_device_as_the_guide_moves_it():
    # the ATPESC guide, step 4: model = model.to(device); criterion = criterion.to(device)
    lines = port_file(EXAMPLE, "xpu").code.splitlines()
    at = lines.index("criterion = torch.nn.MSELoss()")
    assert lines[at + 1] == "criterion = criterion.to(device)  # the loss on the device too"
    # no device variable: the target's own spelling (agnostic: device_type, defined up top)
    src = "import torch\ncriterion = torch.nn.CrossEntropyLoss()\n"
    assert (
        port_source(src, "xpu").code.splitlines()[-1].startswith('criterion = criterion.to("xpu")')
    )
    agnostic = port_source(src, "agnostic").code
    assert "criterion = criterion.to(device_type)" in agnostic
    namespace: dict = {}
    exec(agnostic, namespace)  # runs here: device_type is defined before it is used
    # already moved (in the constructor or on its own line): nothing added
    for moved in ("criterion = torch.nn.MSELoss().cuda()\n",
                  "criterion = torch.nn.MSELoss()\ncriterion = criterion.to(dev)\n"):  # fmt: skip
        assert port_source("import torch\n" + moved).code.count("criterion") == moved.count(
            "criterion"
        )


def test_ipex_import_goes_after_the_last_import_when_torch_is_not_imported_whole():
    src = "import os\nfrom torch import nn\n\noptimizer = make()\n"
    lines = port_source(src, ipex=True).code.splitlines()
    assert lines[:3] == [
        "import os",
        "from torch import nn",
        "import intel_extension_for_pytorch as ipex  # optional: older XPU stacks",
    ]


def test_in_process_device_mask_needs_a_human_in_the_diff_and_the_report():
    # The ATPESC guide sets ZE_AFFINITY_MASK in the job script; set in Python after
    # torch.xpu.device_count() (line 21 of the example) it can come too late to mask anything.
    result = port_file(EXAMPLE, "xpu", ipex=True)
    assert (
        "+# needs a human: set ZE_AFFINITY_MASK in the job script, before Python starts\n"
        '+os.environ["ZE_AFFINITY_MASK"] = os.environ.get("ZE_AFFINITY_MASK", "0,1,2,3")\n'
    ) in result.diff()
    assert result.report().splitlines()[1] == (
        'cuda_train_alcf_style.py:22: os.environ["ZE_AFFINITY_MASK"]  -- ZE_AFFINITY_MASK set '
        "inside the process, after torch.xpu.device_count() on line 21 already enumerated the "
        "devices: the runtime reads it once, at start; set ZE_AFFINITY_MASK in the job script "
        "(export, or mpiexec --env), or keep every device visible and call "
        "torch.xpu.set_device(local_rank)"
    )


@pytest.mark.parametrize(
    ("statement", "code"),
    [('os.environ["ZE_AFFINITY_MASK"] = "0,1"', 'os.environ["ZE_AFFINITY_MASK"]'),
     ("os.environ.setdefault('ZE_AFFINITY_MASK', '0')", 'os.environ.setdefault("ZE_AFFINITY_MASK", ...)'),
     ('os.putenv("ZE_AFFINITY_MASK", "0")', 'os.putenv("ZE_AFFINITY_MASK", ...)'),
     ('os.environ.update({"ZE_AFFINITY_MASK": "0"})', "os.environ.update(ZE_AFFINITY_MASK=...)"),
     ('os.environ["CUDA_VISIBLE_DEVICES"] = "0"', 'os.environ["ZE_AFFINITY_MASK"]'),
     ('os.environ["ZE_FLAT_DEVICE_HIERARCHY"] = "FLAT"', 'os.environ["ZE_FLAT_DEVICE_HIERARCHY"]')],
)  # fmt: skip
def test_every_way_of_setting_a_mask_in_process_is_flagged(statement, code):
    src = f"import os\nimport torch\n\ndef main():\n    {statement}\n"
    result = port_source(src)
    assert [(line, c) for line, c, _ in result.not_ported] == [(5, code)]
    why = result.not_ported[0][2]
    assert "before any device call in this file (too late if an import started the runtime)" in why
    lines = result.code.splitlines()
    assert lines[4].startswith("    # needs a human: set ") and lines[5].startswith("    os.")


def test_reading_a_mask_or_setting_other_variables_is_not_flagged():
    src = (
        "import os\nmask = os.environ.get('ZE_AFFINITY_MASK')\nos.environ['MASTER_PORT'] = '1'\n"
        "os.environ.setdefault('OMP_NUM_THREADS', '4')\n"
    )
    result = port_source(src)
    assert result.not_ported == [] and result.code == src
