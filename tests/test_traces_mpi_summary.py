"""Summaries first, the analysis as an MPI job: the same numbers as the one-process analyses.

A run's summaries combined give the analyses of the whole table to the nanosecond; the MPI
job (2 and 4 ranks over 64 rank files) writes the same tables byte for byte and prints the same
JSON from rank 0 only; a file that does not load is named and the rest complete; a rank that
fails aborts the job; the job submitted through the jobs layer writes its tables and plots.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from pandas.testing import assert_frame_equal

from hpcprof_kit import traces
from hpcprof_kit import traces as A
from hpcprof_kit.cli import main
from hpcprof_kit.errors import SpecError
from hpcprof_kit.jobs import JobSpec, submit
from hpcprof_kit.traces.analyses.breakdown import SUMMARY_COLUMNS
from hpcprof_kit.traces.reporting.mpi_summary import rank_units, share
from hpcprof_kit.traces.reporting.summary_store import read_summary, write_summary
from hpcprof_kit.traces.view.summary import combine, summarise, summarise_rank

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures" / "traces"
sys.path.insert(0, str(REPO / "benchmarks"))
from bench_analyses_scale import write_run  # noqa: E402

PYTHON = Path(sys.executable)
KIT = PYTHON.parent / "hpcprof-kit"


@pytest.fixture(scope="module")
def run64(tmp_path_factory) -> Path:
    """64 small rank files (about 30 KB each), NCCL-like device ranks and gloo CPU ranks."""
    folder = tmp_path_factory.mktemp("run64") / "traces"
    write_run(folder, 64, 0.03, backend="mixed")
    return folder


@pytest.fixture(scope="module")
def one_process(run64, tmp_path_factory) -> tuple[str, Path]:
    """``traces summary DIR --json --out OUT`` in one process: its JSON and its folder."""
    out = tmp_path_factory.mktemp("one")
    done = subprocess.run(
        [KIT, "traces", "summary", str(run64), "--json", "--out", str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout, out


def load(path) -> object:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return traces.load(path)


@pytest.fixture(scope="module")
def run64_summary(run64) -> tuple[object, object]:
    """The 64-rank table and its summary, made once for the tests that compare them."""
    df = load(run64)
    return df, summarise(df)


@pytest.mark.parametrize("path", ["ddp_cpu_2rank", "kineto_xpu-1-of-2.json", "run64"])
def test_combined_summaries_equal_the_analyses_of_the_whole_table(path, request):
    if path == "run64":
        df, run = request.getfixturevalue("run64_summary")
    else:
        df = load(FIXTURES / path)
        run = summarise(df)
    assert_frame_equal(run.breakdown, A.step_breakdown(df), check_exact=True)
    assert_frame_equal(run.steps, A.rank_steps(df), check_exact=True)
    assert_frame_equal(run.overlap, A.comm_overlap(df), check_exact=True)
    assert_frame_equal(run.top_ops, A.top_ops(df), check_exact=True)
    assert_frame_equal(run.top_kernels, A.top_kernels(df), check_exact=True)
    for rank, mine in run.slowest_ops.groupby("rank"):
        theirs = A.top_ops(df[df["rank"] == rank])
        assert_frame_equal(mine.drop(columns="rank").set_index("op"), theirs, check_exact=True)
    for name, rows in run.same_name.groupby("name"):
        theirs = A.same_name(df, name).drop(index="all")
        mine = rows.set_index(rows["rank"].astype(str)).drop(columns=["name", "rank"])
        assert_frame_equal(mine, theirs.loc[mine.index], check_exact=True, check_names=False)
    # the rank that worked longest before waiting, and the straggler counts, as rank_steps says
    steps = A.rank_steps(df)
    assert (
        run.stragglers["rank"].iloc[0] == steps.drop(columns=list(SUMMARY_COLUMNS)).mean().idxmax()
    )
    assert run.stragglers["straggler_steps"].sum() == (steps["straggler"] >= 0).sum()


def test_collectives_add_up_the_comm_track_per_name(run64_summary):
    df, run = run64_summary
    comm = df[(df["track"] == "comm") & (df["dur_ns"] > 0)]
    by_name = comm.groupby(comm["name"].astype(str), observed=True)["dur_ns"]
    mine = run.comm.set_index("collective")
    assert mine["count"].to_dict() == by_name.size().to_dict()
    assert (mine["total_ms"] * 1e6).round().astype(int).to_dict() == by_name.sum().to_dict()
    assert mine.loc["gloo:all_reduce", "ranks"] == 32  # the odd ranks are gloo ranks


def test_a_summary_file_reads_back_to_the_same_tables(tmp_path):
    df = load(FIXTURES / "ddp_cpu_2rank")
    run = summarise(df)
    for r in (0, 1):
        sub = df[df["rank"] == r]
        sub.attrs = {"ranks": {r: df.attrs["ranks"][r]}}
        assert write_summary(summarise_rank(sub), tmp_path) == tmp_path / f"rank-{r}.npz"
    back = combine([read_summary(p) for p in sorted(tmp_path.glob("rank-*.npz"))])
    assert back.ranks == run.ranks
    for name, table in run.tables().items():
        assert_frame_equal(back.tables()[name], table, check_exact=True, obj=name)


def test_files_are_shared_largest_first_and_cycles_travel_together():
    assert share([30, 10, 20, 5], 2) == [[0, 3], [2, 1]]
    assert share([1, 1, 1], 4) == [[0], [1], [2], []]
    names = ["t-0-of-2.json", "t-1-of-2.json", "t_cycle1-0-of-2.json", "odd.json"]
    units = rank_units([Path(n) for n in names])
    assert [[f.name for f in u] for u in units] == [
        ["t-0-of-2.json", "t_cycle1-0-of-2.json"], ["t-1-of-2.json"], ["odd.json"],
    ]  # fmt: skip


def mpi_summary(mpiexec, n: int, path: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    command = [mpiexec, "-n", str(n), KIT, "traces", "summary", str(path), "--mpi", "--json"]
    return subprocess.run(
        [*command, "--out", str(out), *extra], capture_output=True, text=True, timeout=300
    )


@pytest.mark.mpi
@pytest.mark.parametrize("n", [2, 4])
def test_mpi_job_gives_the_one_process_numbers(mpiexec, run64, one_process, n, tmp_path):
    expected_json, one_out = one_process
    done = mpi_summary(mpiexec, n, run64, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == expected_json  # printed once, by rank 0 only
    assert len(json.loads(done.stdout)) == 64
    tables = sorted(p.name for p in (one_out / "tables").glob("*.csv"))
    assert tables == sorted(p.name for p in (tmp_path / "tables").glob("*.csv"))
    for name in tables:  # every table, byte for byte
        assert (tmp_path / "tables" / name).read_bytes() == (one_out / "tables" / name).read_bytes()
    assert len(list((tmp_path / "summaries").glob("rank-*.npz"))) == 64
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == [
        "breakdown_spread.png", "rank_heatmap.png",
    ]  # fmt: skip
    record = json.loads((tmp_path / "tables" / "analysis.json").read_text())
    assert (record["files"], record["ranks"], record["mpi_ranks"]) == (64, 64, n)


@pytest.fixture
def run_with_a_bad_file(run64, tmp_path) -> Path:
    folder = tmp_path / "traces"
    folder.mkdir()
    for r in range(5):
        shutil.copy(run64 / f"synthetic-{r}-of-64.json", folder / f"synthetic-{r}-of-6.json")
    (folder / "synthetic-5-of-6.json").write_text("garbage, not a trace")
    return folder


@pytest.mark.mpi
def test_a_file_that_does_not_load_is_named_and_the_rest_complete(
    mpiexec, run_with_a_bad_file, tmp_path
):
    done = mpi_summary(mpiexec, 2, run_with_a_bad_file, tmp_path / "out")
    assert done.returncode == 0, done.stderr
    assert [row["rank"] for row in json.loads(done.stdout)] == [0, 1, 2, 3, 4]
    bad = str(run_with_a_bad_file / "synthetic-5-of-6.json")
    assert f"error: {bad}: not analysed: TraceFormatError: {bad}: not a trace file" in done.stderr
    failures = json.loads((tmp_path / "out" / "tables" / "failures.json").read_text())
    assert [f["file"] for f in failures] == [bad]


@pytest.mark.mpi
def test_no_file_loaded_fails_the_job(mpiexec, tmp_path):
    (tmp_path / "t-0-of-2.json").write_text("garbage")
    (tmp_path / "t-1-of-2.json").write_text("{}")
    done = mpi_summary(mpiexec, 2, tmp_path, tmp_path / "out")
    assert done.returncode == 2
    assert done.stderr.count("hpcprof-kit traces: no trace file loaded: all 2 failed") == 1
    assert "t-0-of-2.json: not analysed: TraceFormatError" in done.stderr


@pytest.mark.mpi
def test_a_rank_that_fails_mid_analysis_aborts_the_job(mpiexec, run_with_a_bad_file, tmp_path):
    crash = (
        "import sys\n"
        "from hpcprof_kit.traces.reporting import mpi_summary as m\n"
        "def boom(files): raise RuntimeError('disk vanished')\n"
        "if m.world().Get_rank() == 1: m.summarise_unit = boom\n"
        "from hpcprof_kit.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    args = ["traces", "summary", str(run_with_a_bad_file), "--mpi", "--out", str(tmp_path)]
    done = subprocess.run(
        [mpiexec, "-n", "2", PYTHON, "-c", crash, *args],
        capture_output=True,
        text=True,
        timeout=120,  # a hang fails here rather than stall the suite
    )
    assert done.returncode != 0
    # Hydra may kill rank 1 before it forwards its stderr; the file is always there
    record = (tmp_path / "failed-mpi-rank-1.txt").read_text()
    assert record.startswith("error: MPI rank 1 failed; aborting the job\n")
    assert "RuntimeError: disk vanished" in record
    assert not (tmp_path / "failed-mpi-rank-0.txt").exists()


@pytest.mark.mpi
def test_analysis_submitted_through_the_jobs_layer_writes_tables_and_plots(run_with_a_bad_file):
    job = submit(JobSpec(system="local", example="analyze", args=[str(run_with_a_bad_file)]))
    assert job.wait(timeout=300, progress=False) == "COMPLETED", job.tail(stream="stderr")
    tables = {p.name for p in (job.run_dir / "tables").iterdir()}
    assert {"summary.csv", "rank_steps.csv", "breakdown_spread.csv", "failures.json"} <= tables
    assert sorted(p.name for p in (job.run_dir / "plots").iterdir()) == [
        "breakdown_spread.png", "rank_heatmap.png",
    ]  # fmt: skip
    assert "synthetic-5-of-6.json: not analysed" in job.tail(stream="stderr")
    assert job.tail().splitlines()[0].split()[:3] == ["rank", "kind", "events"]
    assert (job.run_dir / "summaries" / "rank-4.npz").is_file()


def test_the_analyze_example_renders_its_path_as_app_arguments():
    script = JobSpec(system="local", example="analyze", args=["/data/run"], nodes=1).render()
    assert "python3 -m hpcprof_kit.apps.analyze /data/run" in script


def test_profile_is_refused_for_the_analysis():
    with pytest.raises(SpecError, match="profile=True asks the analyze example to profile itself"):
        JobSpec(system="local", example="analyze", args=["/data/run"], profile=True).validate()


def test_summary_help_states_the_exit_status(capsys):
    with pytest.raises(SystemExit):
        main(["traces", "summary", "--help"])
    assert "2 when no file loaded" in " ".join(capsys.readouterr().out.split())


def test_mpi_without_mpi4py_names_the_fix(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    from hpcprof_kit.traces.reporting.mpi_summary import world

    with pytest.raises(SpecError, match="--mpi needs mpi4py"):
        world()


@pytest.mark.slurm
@pytest.mark.mpi
def test_analysis_submitted_to_slurm_runs_as_one_mpi_job(cluster_env, run_with_a_bad_file):
    spec = JobSpec(example="analyze", args=[str(run_with_a_bad_file)], binding="none")
    job = submit(spec.with_(system="slurm"), backend="slurm")
    assert job.wait(timeout=300, progress=False) == "COMPLETED", job.tail(stream="stderr")
    record = json.loads((job.run_dir / "tables" / "analysis.json").read_text())
    assert (record["ranks"], record["mpi_ranks"]) == (5, 2)  # srun's two tasks, one MPI job
    assert job.tail().splitlines()[0].split()[:3] == ["rank", "kind", "events"]
    assert (job.run_dir / "plots" / "rank_heatmap.png").is_file()
