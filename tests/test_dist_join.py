"""distributed() inside a process group it did not make: it joins, and leaves the group up."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from hpcprof_kit.dist import distributed
from hpcprof_kit.errors import DistError

RANK_VARS = ("PMI_RANK", "PMI_SIZE", "RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_PROCID",
             "OMPI_COMM_WORLD_RANK", "PALS_RANKID", "PMIX_RANK")  # fmt: skip


@pytest.fixture
def own_group(tmp_path, monkeypatch):
    """A one-rank gloo group made the way a user's script makes it, destroyed afterwards."""
    import torch.distributed as tdist

    for key in RANK_VARS:
        monkeypatch.delenv(key, raising=False)
    tdist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0,
                             world_size=1)  # fmt: skip
    yield tdist
    if tdist.is_initialized():
        tdist.destroy_process_group()


def test_entering_inside_an_existing_group_leaves_it_intact(own_group):
    import torch

    tdist = own_group
    world = tdist.group.WORLD
    with distributed() as info:
        assert tdist.group.WORLD is world  # no second init_process_group
        assert (info.rank, info.world_size, info.backend, info.device) == (0, 1, "gloo", "cpu")
    assert tdist.is_initialized() and tdist.group.WORLD is world
    total = torch.tensor([2.0])
    tdist.all_reduce(total)  # the group still works after the block
    assert total.item() == 2.0
    assert "MASTER_ADDR" not in os.environ and "MASTER_PORT" not in os.environ


def test_a_backend_other_than_the_running_groups_is_refused(own_group):
    with pytest.raises(DistError) as err, distributed(backend="mpi"):
        pass
    assert str(err.value) == (
        "backend 'mpi' was asked for, but this process is already in a gloo group of 1 rank(s) "
        "(made by init_process_group before distributed()); leave backend out to join that "
        "group, or destroy it first"
    )
    assert own_group.is_initialized()


def test_nested_blocks_tear_down_only_the_outer_group(monkeypatch):
    import torch.distributed as tdist

    for key in RANK_VARS:
        monkeypatch.delenv(key, raising=False)
    with distributed() as outer:
        with distributed() as inner:
            assert inner == outer
        assert tdist.is_initialized(), "the inner block destroyed the outer block's group"
    assert not tdist.is_initialized()


def test_a_body_that_destroys_the_group_itself_exits_cleanly(monkeypatch):
    import torch.distributed as tdist

    for key in RANK_VARS:
        monkeypatch.delenv(key, raising=False)
    with distributed():
        tdist.destroy_process_group()
    assert not tdist.is_initialized() and "MASTER_ADDR" not in os.environ


DYNAMO_PROBE = textwrap.dedent(
    """
    import sys
    import torch.distributed as tdist
    from hpcprof_kit.dist import distributed

    real = tdist.init_process_group
    def watched(*args, **kwargs):
        print("dynamo imported before the group:", "torch._dynamo" in sys.modules)
        return real(*args, **kwargs)
    tdist.init_process_group = watched
    with distributed():
        pass
    """
)


def test_the_dynamo_import_happens_before_the_group_is_made():
    env = {k: v for k, v in os.environ.items() if k not in RANK_VARS}
    done = subprocess.run([sys.executable, "-c", DYNAMO_PROBE], env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    # the probe's own line; gloo may print its own (torch 2.8: "[Gloo] Rank 0 is connected ...")
    probe = [ln for ln in done.stdout.splitlines() if ln.startswith("dynamo imported")]
    assert probe == ["dynamo imported before the group: True"]
