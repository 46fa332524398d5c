"""The rendezvous never hangs on a name: rank 0 publishes an address that works, every rank
gives up with a DistError naming host, port and timeout, and 2 ranks under Hydra still meet
when the system's high-speed-network suffix does not resolve here."""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import sys
import textwrap

import pytest

from hpcprof_kit import dist, rendezvous
from hpcprof_kit.dist import distributed
from hpcprof_kit.errors import DistError
from hpcprof_kit.ranks import ranks_from_env
from hpcprof_kit.rendezvous import candidate_name, check_reachable, free_port, publish_address

from launch import run_ok

AURORA_HSN = ".hsn.cm.aurora.alcf.anl.gov"
LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                 "MASTER_PORT", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE")  # fmt: skip


def _binds_here(ip: str) -> bool:
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((ip, 0))
        except OSError:
            return False
    return True


def test_candidate_from_an_fqdn_host_uses_the_short_name():
    fqdn = "x4102c5s0b0n0.hostmgmt2102.cm.aurora.alcf.anl.gov"
    assert candidate_name(fqdn, AURORA_HSN) == "x4102c5s0b0n0" + AURORA_HSN
    # The name that is checked (and named when it fails) is the short one, too.
    _, note = publish_address("localhost.cluster.example", ".invalid", same_host=True)
    assert note.startswith("MASTER_ADDR localhost.invalid does not resolve here")


def test_unresolvable_candidate_falls_back_to_an_ip_of_this_host_and_says_so():
    host = socket.gethostname()
    addr, note = publish_address(host, ".invalid", same_host=True)
    ipaddress.ip_address(addr)  # an IP, not a name
    assert _binds_here(addr)
    bad = re.escape(host.split(".")[0] + ".invalid")
    assert re.fullmatch(
        rf"MASTER_ADDR {bad} does not resolve here \(.+\); rank 0 publishes {re.escape(addr)} "
        r"instead",
        note,
    )


def test_resolvable_local_name_is_kept():
    assert publish_address("localhost", "", same_host=True) == ("localhost", "")


def test_ranks_on_several_hosts_never_get_loopback(monkeypatch):
    monkeypatch.setattr(rendezvous, "_outward_address", lambda: [])  # a host with no route out
    assert publish_address("localhost", ".invalid", same_host=True)[0] in ("127.0.0.1", "::1")
    with pytest.raises(DistError, match=r"localhost\.invalid does not resolve here.*no address "
                       r"the other ranks could reach.*fix: .*hsn_suffix"):  # fmt: skip
        publish_address("localhost", ".invalid", same_host=False)


class _Comm:
    """Rank ``rank`` of a 2-rank job on one host, whose broadcast returns ``root_sends``."""

    def __init__(self, root_sends=None) -> None:
        self.root_sends = root_sends

    def Get_size(self) -> int:  # noqa: N802 - mpi4py's spelling
        return 2

    def allgather(self, value):
        return [value, value]

    def bcast(self, value, root=0):
        return value if self.root_sends is None else self.root_sends


def _rank(rank: int):
    return ranks_from_env({"PMI_RANK": str(rank), "PMI_SIZE": "2"}, use_mpi=False)


def test_rank_0_publishes_the_fallback_and_warns_once(monkeypatch, capsys):
    monkeypatch.setattr(rendezvous, "_mpi_comm", _Comm)
    addr, port, nodes = dist._rendezvous(_rank(0), "localhost", ".invalid", verify=True)
    ipaddress.ip_address(addr)
    assert int(port) > 0 and nodes == 1
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and re.fullmatch(
        r"hpcprof-kit: MASTER_ADDR localhost\.invalid does not resolve here \(.+\); "
        rf"rank 0 publishes {re.escape(addr)} instead",
        lines[0],
    ), lines


def test_a_rank_0_without_an_address_fails_every_rank(monkeypatch, capsys):
    why = "MASTER_ADDR n0.invalid does not resolve here, and host n0 has no address"
    monkeypatch.setattr(rendezvous, "_mpi_comm", lambda: _Comm(root_sends=("", why, "")))
    with pytest.raises(DistError, match=r"rank 0 found no rendezvous address: MASTER_ADDR n0"):
        dist._rendezvous(_rank(1), "n1", ".invalid", verify=True)
    assert capsys.readouterr().err == ""  # only rank 0 ever prints the warning


@pytest.fixture
def torchrun_rank(monkeypatch):
    """Make this process rank ``rank`` of 2 under torchrun, with a given MASTER_ADDR/PORT."""
    saved = {k: os.environ.get(k) for k in ("MASTER_ADDR", "MASTER_PORT")}

    def become(rank: int, addr: str, port: int) -> None:
        for key in (*LAUNCHER_VARS, "PMI_RANK", "PMI_SIZE", "PALS_RANKID", "PMIX_RANK"):
            monkeypatch.delenv(key, raising=False)
        monkeypatch.setenv("TORCHELASTIC_RUN_ID", "rendezvous-test")
        for key, value in {"RANK": rank, "LOCAL_RANK": rank, "WORLD_SIZE": 2,
                           "LOCAL_WORLD_SIZE": 2}.items():  # fmt: skip
            monkeypatch.setenv(key, str(value))
        # Set by hand: conftest's leak check runs before monkeypatch would undo these.
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = addr, str(port)

    yield become
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.mark.timeout(60)
def test_non_zero_rank_with_an_unresolvable_master_addr_fails_at_once(torchrun_rank):
    import torch.distributed as tdist

    torchrun_rank(1, "x4102c5s0b0n0.hsn.invalid", 29511)
    # The rendezvous timeout is long: the error must come from the name check, not from it.
    with pytest.raises(DistError) as err, distributed(rendezvous_timeout_s=600):
        pass
    assert re.match(
        r"rank 1 cannot resolve MASTER_ADDR x4102c5s0b0n0\.hsn\.invalid \(port 29511\): "
        r"\[Errno -?\d+\] .+; fix: give MASTER_ADDR a name or IP that resolves on every node",
        str(err.value),
    )
    assert not tdist.is_initialized()
    assert os.environ["MASTER_ADDR"] == "x4102c5s0b0n0.hsn.invalid"  # the caller's, restored


def test_check_reachable_accepts_an_ip_and_refuses_a_bad_name():
    check_reachable("127.0.0.1", "29500", rank=3)
    with pytest.raises(
        DistError, match=r"rank 3 cannot resolve MASTER_ADDR n0\.invalid \(port 1\)"
    ):
        check_reachable("n0.invalid", "1", rank=3)


@pytest.mark.timeout(120)
def test_store_nobody_serves_gives_up_after_the_rendezvous_timeout(torchrun_rank):
    port = free_port()  # nobody listens there
    torchrun_rank(1, "127.0.0.1", port)
    with pytest.raises(DistError) as err, distributed(rendezvous_timeout_s=2):
        pass
    assert re.match(
        rf"rank 1 could not reach the rendezvous at 127\.0\.0\.1:{port} within 2 s \(.+\); "
        r"fix: check that all 2 ranks started",
        str(err.value),
    )


@pytest.mark.timeout(120)
def test_rank_0_whose_peers_never_come_gives_up_after_the_rendezvous_timeout(torchrun_rank):
    port = free_port()
    torchrun_rank(0, "127.0.0.1", port)
    with pytest.raises(DistError) as err, distributed(rendezvous_timeout_s=2):
        pass
    assert re.match(
        rf"rank 0 could not reach the rendezvous at 127\.0\.0\.1:{port} within 2 s \(.+\); ",
        str(err.value),
    )


PROBE = textwrap.dedent(
    """
    import os, sys, torch, torch.distributed as tdist
    from hpcprof_kit.dist import distributed

    def say(line):  # one write per line, so Hydra never interleaves two ranks mid-line
        sys.stdout.write(line + "\\n")
        sys.stdout.flush()

    with distributed(rendezvous_timeout_s=60) as info:
        total = torch.tensor([float(info.rank + 1)])
        tdist.all_reduce(total)
        say(f"rank={info.rank} sum={total.item():g} addr={os.environ['MASTER_ADDR']}")
    """
)


@pytest.mark.mpi
@pytest.mark.timeout(120)
def test_two_ranks_meet_when_the_aurora_hsn_name_does_not_resolve(mpiexec, tmp_path):
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    env.update(HPCPROF_SYSTEM="aurora", KINETO_LOG_LEVEL="6")
    candidate = socket.gethostname().split(".")[0] + AURORA_HSN
    try:
        socket.getaddrinfo(candidate, None)
        pytest.skip(f"{candidate} resolves here: the fallback is not exercised")
    except OSError:
        pass
    done = run_ok([mpiexec, "-n", "2", sys.executable, str(script)], timeout=100, env=env)
    ranks = sorted(re.findall(r"^rank=(\d) sum=(\S+) addr=(\S+)$", done.stdout, re.M))
    assert [(r, s) for r, s, _ in ranks] == [("0", "3"), ("1", "3")], done.stdout
    warnings = re.findall(r"^hpcprof-kit: MASTER_ADDR (\S+) does not resolve here \(.+\); "
                          r"rank 0 publishes (\S+) instead$", done.stderr, re.M)  # fmt: skip
    assert warnings == [(candidate, ranks[0][2])], done.stderr  # one line, naming what was used
    assert ranks[0][2] == ranks[1][2]
