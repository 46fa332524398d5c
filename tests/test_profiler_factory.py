"""The profiler factory: per-rank traces and tables with the names of the contract, steps as the table says."""

from __future__ import annotations

import argparse
import gzip
import json
import re

import pytest

from hpcprof_kit.errors import ScheduleError, SpecError
from hpcprof_kit.profiling import (
    add_profiler_args,
    compile_note,
    make_profiler,
    profiler_from_args,
    schedule_table,
)

from train_run import SCHEDULE


def profiler_steps(path):
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        events = json.load(fh)["traceEvents"]
    steps = {e["name"] for e in events if re.fullmatch(r"ProfilerStep#\d+", e.get("name", ""))}
    return sorted(steps, key=lambda s: int(s.split("#")[1]))


@pytest.mark.mpi
def test_two_rank_train_run_writes_named_traces_and_tables(train_run):
    assert train_run.returncode == 0, train_run.stderr[-2000:]
    run_dir = train_run.run_dir
    traces = sorted(p.name for p in (run_dir / "traces").iterdir())
    assert traces == [
        "trace-0-of-2.json", "trace-1-of-2.json",
        "trace_cycle1-0-of-2.json", "trace_cycle1-1-of-2.json",
    ]  # fmt: skip
    tables = sorted(p.name for p in (run_dir / "tables").iterdir())
    assert tables == [t.replace(".json", ".txt") for t in traces]

    expected = schedule_table(**SCHEDULE)  # wait=1, warmup=1, active=2, repeat=2 over 9 steps
    assert expected["profiler_step"][expected["trace"] == 1].tolist() == [
        "ProfilerStep#6",
        "ProfilerStep#7",
    ]
    for rank in (0, 1):
        for cycle, name in enumerate((f"trace-{rank}-of-2.json", f"trace_cycle1-{rank}-of-2.json")):
            want = expected.loc[expected["trace"] == cycle, "profiler_step"].tolist()
            assert profiler_steps(run_dir / "traces" / name) == want
        table = (run_dir / "tables" / f"trace-{rank}-of-2.txt").read_text()
        assert "Self CPU" in table and "ProfilerStep*" in table


def test_gzip_and_rank_selection_in_one_process(tmp_path):
    import torch

    prof = make_profiler(schedule={"wait": 0, "warmup": 1, "active": 1, "repeat": 1},
                         trace_dir=tmp_path / "traces", rank=2, world_size=4,
                         ranks="2,3", prefix="mine", gzip=True)  # fmt: skip
    assert prof.enabled
    with prof:
        for _ in range(3):
            torch.ones(16).sum()
            prof.step()
    assert [p.name for p in (tmp_path / "traces").iterdir()] == ["mine-2-of-4.json.gz"]
    assert profiler_steps(tmp_path / "traces" / "mine-2-of-4.json.gz") == ["ProfilerStep#1"]
    assert (tmp_path / "tables" / "mine-2-of-4.txt").is_file()

    skipped = make_profiler(rank=1, world_size=4, ranks="2,3", trace_dir=tmp_path / "other")
    assert not skipped.enabled and not (tmp_path / "other").exists()
    assert not make_profiler(rank=1, world_size=4, local_rank=1, ranks="first-local").enabled
    assert make_profiler(rank=4, world_size=8, local_rank=0, ranks="first-local",
                         trace_dir=tmp_path / "t8").enabled  # fmt: skip


def test_a_second_run_into_the_same_folder_never_overwrites(tmp_path):
    import torch

    for _ in range(2):
        prof = make_profiler(schedule={"wait": 0, "warmup": 0, "active": 1}, rank=0, world_size=1,
                             trace_dir=tmp_path / "traces")  # fmt: skip
        with prof:
            torch.ones(4).sum()
            prof.step()
    names = sorted(p.name for p in (tmp_path / "traces").iterdir())
    assert names == ["trace-0-of-1.json", "trace_cycle1-0-of-1.json"]


def test_flags_and_bad_input():
    parser = add_profiler_args(argparse.ArgumentParser())
    args = parser.parse_args([])
    assert (args.prof_wait, args.prof_warmup, args.prof_active, args.prof_repeat) == (1, 1, 2, 1)
    assert not profiler_from_args(args, 0, 2).enabled
    bad = parser.parse_args(["--profile", "--prof-active", "0"])
    with pytest.raises(ScheduleError, match="active=0"):
        profiler_from_args(bad, 0, 2)
    with pytest.raises(SpecError, match=r"trace ranks \[5\] are outside this job \(world size 2"):
        profiler_from_args(parser.parse_args(["--profile", "--trace-ranks", "0,5"]), 0, 2)
    with pytest.raises(
        SpecError, match="xpu cannot be recorded on this machine.*--activities auto"
    ):
        profiler_from_args(parser.parse_args(["--profile", "--activities", "xpu"]), 0, 1)
    with pytest.raises(SpecError, match="'gpu'"):
        profiler_from_args(parser.parse_args(["--profile", "--activities", "cpu,gpu"]), 0, 1)


def test_compile_note_only_when_both_are_on(capsys):
    assert compile_note(False, True) is None and compile_note(True, False) is None
    text = compile_note(True, True)
    assert "record_function ranges inside compiled regions are ignored" in text
    assert text in capsys.readouterr().err


class _ExportsAfter:
    """A finished profile whose export first lets ``other`` run: another rank exporting into the
    same trace folder at that instant (the order a loaded machine gave, made certain here)."""

    def __init__(self, prof, other):
        self.prof, self.other = prof, other

    def export_chrome_trace(self, path):
        self.other()
        self.prof.export_chrome_trace(path)

    def key_averages(self):
        return self.prof.key_averages()


def test_two_ranks_exporting_at_once_into_one_folder_both_keep_their_trace(tmp_path):
    import torch

    from hpcprof_kit.profiling.factory import TraceWriter

    profs = []
    for _ in range(2):
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            torch.ones(4).sum()
        profs.append(prof)
    traces, tables = tmp_path / "traces", tmp_path / "tables"
    rank0, rank1 = (TraceWriter(traces, tables, "trace", r, 2, False, "self_cpu_time_total")
                    for r in (0, 1))  # fmt: skip
    # rank 1 writes its whole trace while rank 0 is between its folder and its export
    rank0(_ExportsAfter(profs[0], lambda: rank1(profs[1])))
    assert sorted(p.name for p in traces.iterdir()) == ["trace-0-of-2.json", "trace-1-of-2.json"]
    for path in traces.iterdir():
        assert json.loads(path.read_text())["traceEvents"]
    assert sorted(p.name for p in tables.iterdir()) == ["trace-0-of-2.txt", "trace-1-of-2.txt"]
