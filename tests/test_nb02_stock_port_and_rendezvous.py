"""Notebook 02 ports to the stock ``torch.xpu`` by default (before, ``with_ipex = True`` added
an unguarded IPEX import though the notebook calls IPEX deprecated), and the port report flags
the broken ``MASTER_ADDR`` line 24 of the example apart from the exercise's answer, which stays
[22, 27]."""

from __future__ import annotations

from pathlib import Path

import nbformat

from hpcprof_kit.exercises.nb02 import check_needs_a_human
from hpcprof_kit.porting import IPEX_IMPORT, broken_rendezvous, port_file, port_source
from hpcprof_kit.validate.answers import answer_needs_a_human

REPO = Path(__file__).resolve().parents[1]
NB02 = REPO / "notebooks" / "02_xpu_code_changes.ipynb"
EXAMPLE = REPO / "examples" / "cuda_train_alcf_style.py"


def _parameters() -> dict:
    nb = nbformat.read(NB02, as_version=4)
    scope: dict = {}
    exec(nb.cells[1].source, scope)  # noqa: S102 - the notebook's parameters cell
    return scope


def test_nb02_default_port_is_stock_torch_xpu_without_ipex():
    params = _parameters()
    assert params["with_ipex"] is False and params["target"] == "xpu"
    diff = port_file(EXAMPLE, params["target"], ipex=params["with_ipex"]).diff()
    assert "intel_extension_for_pytorch" not in diff and "ipex.optimize" not in diff
    assert 'backend="xccl"' in diff


def test_nb02_ipex_only_when_asked():
    assert IPEX_IMPORT.strip() in port_file(EXAMPLE, "xpu", ipex=True).code


def test_nb02_port_report_flags_master_addr_line_24_apart():
    report = port_file(EXAMPLE, "xpu").report()
    head, _, tail = report.partition("wrong on any device (no port changes it; fix it by hand):\n")
    assert tail.startswith('cuda_train_alcf_style.py:24: os.environ["MASTER_ADDR"]  -- ')
    assert "comm.bcast" in tail
    assert ":24:" not in head  # not among the lines the exercise asks for
    assert answer_needs_a_human() == [22, 27]


def test_nb02_a_rendezvous_from_rank_0s_broadcast_is_not_flagged():
    good = (
        "import os, socket\nfrom mpi4py import MPI\n"
        "addr = MPI.COMM_WORLD.bcast(socket.gethostname() if rank == 0 else None, root=0)\n"
        'os.environ["MASTER_ADDR"] = addr\n'
    )
    assert broken_rendezvous(good) == []
    assert port_source(good).broken == []


def test_nb02_check_names_line_24_as_wrong_on_cuda_too(capsys):
    assert not check_needs_a_human([22, 24, 27])
    assert "Line 24 is wrong on CUDA too" in capsys.readouterr().out
    assert check_needs_a_human([22, 27])
