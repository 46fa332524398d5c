"""Sweeps on the local backend: the grid, sweep.json, a variant the app really rejects, a
re-run of only that variant, nothing overwritten; bad grids refused before anything runs; the
array scripts' text; the comparison, ladder and outliers on run directories written here."""

from __future__ import annotations

import json
import os

import pytest

from hpcprof_kit.cli import main
from hpcprof_kit.errors import SpecError, SubmitError
from hpcprof_kit.jobs import JobSpec, RunDir, sweep_array
from hpcprof_kit.jobs.sweep import Sweep, parse_vary
from hpcprof_kit.jobs.sweep_compare import outliers

# The smallest seqpar run: one rank, three timed steps (a spread needs three).
SMALL = ("--steps", "3", "--warmup", "0", "--seq-len", "64", "--hidden", "32")


def small(**fields) -> JobSpec:
    return JobSpec(system="local", example="seqpar", ranks_per_node=1, binding="none",
                   args=SMALL, **fields)  # fmt: skip


def test_grid_is_every_combination_in_order():
    sweep = small().sweep(ranks_per_node=[1, 2], **{"--dtype": ["float32", "bfloat16"]})
    assert [v.label for v in sweep.variants] == [
        "ranks_per_node=1 --dtype=float32", "ranks_per_node=1 --dtype=bfloat16",
        "ranks_per_node=2 --dtype=float32", "ranks_per_node=2 --dtype=bfloat16",
    ]  # fmt: skip
    assert sweep.variants[3].spec.ranks_per_node == 2
    assert sweep.variants[3].spec.args == (*SMALL, "--dtype", "bfloat16")
    assert sweep.path is None  # nothing written before run()


def test_flag_values_add_or_leave_out_the_flag():
    sweep = JobSpec(system="local").sweep(**{"--compile": [False, True]})
    assert [v.spec.full_command()[-1] for v in sweep.variants] == ["hpcprof_kit.apps.train",
                                                                   "--compile"]  # fmt: skip
    assert parse_vary(["nodes=1,2", "--compile=off,on", "binding=none"], JobSpec()) == {
        "nodes": [1, 2], "--compile": [False, True], "binding": ["none"],
    }  # fmt: skip


def test_failed_variant_is_marked_others_complete_and_rerun_runs_only_it(isolated_runs):
    # float16 is not one of seqpar's --dtype choices: the app itself exits 2.
    sweep = small().sweep(**{"--dtype": ["float32", "float16", "bfloat16"]}).run()
    record = json.loads((sweep.path / "sweep.json").read_text())
    assert sweep.path.parent == isolated_runs.resolve()
    assert sweep.path.name.startswith("sweep_seqpar_local_")
    assert record["grid"] == {"--dtype": ["float32", "float16", "bfloat16"]}
    assert [e["state"] for e in record["variants"]] == ["COMPLETED", "FAILED", "COMPLETED"]
    failed_run = sweep.path / record["variants"][1]["run_dir"]
    assert "invalid choice: 'float16'" in (failed_run / "stderr").read_text()
    for entry in record["variants"]:  # each a run directory as submit() makes them
        run = RunDir(sweep.path / entry["run_dir"])
        assert run.manifest()["job_id"] == entry["job_id"]
        assert run.script.read_text() == run.spec().render()

    table = sweep.compare()
    assert list(table["state"]) == ["COMPLETED", "FAILED", "COMPLETED"]
    assert table["step_median_ms"].isna().tolist() == [False, True, False]
    assert (
        (sweep.path / "comparison.csv").read_text().splitlines()[2].startswith("1,float16,FAILED")
    )

    before = {p: p.stat().st_mtime_ns for p in sweep.path.rglob("*") if p.is_file()
              and p.name not in ("sweep.json", "comparison.csv")}  # fmt: skip
    again = Sweep.load(sweep.path)
    assert [v.index for v in again.pending()] == [1]
    again.run()
    after = json.loads((sweep.path / "sweep.json").read_text())["variants"]
    assert [e["run_dir"] for e in after][::2] == [e["run_dir"] for e in record["variants"]][::2]
    assert after[1]["run_dir"] != record["variants"][1]["run_dir"]
    assert after[1]["earlier_runs"] == [record["variants"][1]["run_dir"]]
    # Nothing already written changed: only the re-run's new run directory was added.
    assert {p: p.stat().st_mtime_ns for p in before} == before
    runs = sorted(p.name for p in sweep.path.iterdir() if p.is_dir())
    assert len(runs) == 4 and after[1]["run_dir"] in runs


def test_cli_sweep_and_compare(isolated_runs, capsys):
    argv = ["sweep", "--system", "local", "--example", "seqpar", "--ranks-per-node", "1",
            "--binding", "none", "--vary=--dtype=float32", "--json", "--", *SMALL]  # fmt: skip
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["states"] == {"0": "COMPLETED"}
    assert main(["sweep", "compare", out["sweep_dir"]]) == 0
    shown = capsys.readouterr().out
    assert "float32" in shown and "COMPLETED" in shown


@pytest.mark.parametrize(
    ("grid", "words"),
    [
        ({"colour": ["red"]}, ["field 'colour'", "not a JobSpec field", "'--colour'"]),
        ({"nodes": []}, ["field 'nodes' has an empty value list"]),
        ({"example": ["train", "seqpar"]}, ["field 'example' makes a different job"]),
        ({"nodes": [1, 2]}, ["variant 1 (nodes=2)", "nodes 2", "1-1", "ask for 1-1 nodes"]),
        ({"walltime": ["00:10:00", "99:00:00"]}, ["variant 1", "walltime 99:00:00", "24:00:00"]),
    ],
)
def test_bad_grid_refused_before_anything_is_written(isolated_runs, grid, words):
    with pytest.raises(SpecError) as err:
        small().sweep(**grid)
    for word in words:
        assert word in str(err.value)
    assert not isolated_runs.exists() or not any(isolated_runs.iterdir())


def test_grid_larger_than_the_array_limit_is_refused(monkeypatch):
    monkeypatch.setitem(sweep_array.ARRAY_LIMITS, "slurm", 3)
    with pytest.raises(SpecError, match=r"4 variants, more than slurm's array limit of 3"):
        JobSpec(system="slurm").sweep(nodes=[1, 2], **{"--compile": [False, True]})


def test_one_job_per_user_queue_sums_walltimes_and_refuses_too_long():
    base = JobSpec(system="aurora", account="P", queue="debug", walltime="00:30:00")
    with pytest.raises(SpecError) as err:
        base.sweep(**{"--compile": [False, True, False]})
    assert "queue debug takes one job per user" in str(err.value)
    assert "01:30:00, more than the queue's 01:00:00" in str(err.value)


def test_slurm_array_script_selects_the_variant_by_index():
    sweep = JobSpec(system="slurm", example="seqpar").sweep(nodes=[1, 2])
    text = sweep_array.array_script(sweep, ["/r/a", "/r/b"], [0, 1], "slurm", max_concurrent=1)
    assert "#SBATCH -N 2\n" in text and "#SBATCH --array=0-1%1\n" in text
    assert "#SBATCH -o array-%A_%a.out\n" in text and "#SBATCH -o stdout" not in text
    assert 'case "${SLURM_ARRAY_TASK_ID:?this script runs as a job array}" in' in text
    assert "    1) run_dir=/r/b ;;  # nodes=2\n" in text
    assert text.endswith(
        'unset SLURM_NTASKS SLURM_NPROCS\ncd "$run_dir"\nbash job.sh >stdout 2>stderr\n'
    )
    # A re-run of some variants lists only those indices.
    assert "#SBATCH --array=0,2\n" in sweep_array.array_script(
        JobSpec(system="slurm").sweep(nodes=[1, 2, 3]), ["/a", "/c"], [0, 2], "slurm"
    )


def test_pbs_array_and_one_job_sequence_scripts():
    arr = JobSpec(system="aurora", account="P", queue="capacity").sweep(nodes=[1, 2])
    text = sweep_array.array_script(arr, ["/r/a", "/r/b"], [0, 1], "pbs", max_concurrent=2)
    assert "#PBS -J 0-1%2\n" in text and "#PBS -l select=2" in text
    assert 'case "${PBS_ARRAY_INDEX:?this script runs as a job array}" in' in text
    assert sweep_array.one_job_only(arr) is False
    seq = JobSpec(system="aurora", account="P", queue="debug", walltime="00:20:00")
    seq = seq.sweep(**{"--compile": [False, True]})
    assert sweep_array.one_job_only(seq) is True
    text = sweep_array.array_script(seq, ["/r/a", "/r/b"], [0, 1], "pbs", sequence=True)
    assert "#PBS -J" not in text and "#PBS -l walltime=00:40:00\n" in text
    assert "# Queue debug takes one job per user, and PBS counts an array of N as N jobs" in text
    assert "for run_dir in /r/a /r/b; do\n" in text


def _planted_run(folder, name: str, steps_ms: list[float], dtype: str = "float32") -> None:
    timings = folder / name / "timings"
    timings.mkdir(parents=True)
    record = {"app": "seqpar", "rank": 0, "world_size": 1, "nodes": 1, "dtype": dtype,
              "params": {"seq_len": 1000},
              "timings": {"matmul_1": [s / 2e3 for s in steps_ms],
                          "all_gather": [s / 4e3 for s in steps_ms],
                          "step": [s / 1e3 for s in steps_ms]}}  # fmt: skip
    (timings / "seqpar-0-of-1.json").write_text(json.dumps(record))


def test_compare_ladder_and_outlier_on_planted_runs(isolated_runs):
    sweep = small().sweep(**{"--warmup": [0, 1, 2, 3, 4]})
    sweep.create()
    medians = [40.0, 30.0, 80.0, 20.0, 10.0]  # rung 2 spikes above both neighbours' spread
    for i, m in enumerate(medians):
        _planted_run(sweep.path, f"run{i}", [m - 1, m, m + 1])
        sweep.mark(i, run_dir=f"run{i}", state="COMPLETED")
    table = sweep.compare()
    assert table["step_median_ms"].tolist() == medians
    assert table["outlier"].tolist() == [False, False, True, False, False]
    assert table["throughput"].tolist() == [1000 * 1e3 / m for m in medians]
    assert table["comm_share"].round(3).tolist() == [0.25] * 5
    assert table["compute_share"].round(3).tolist() == [0.5] * 5
    rungs = sweep.ladder()
    assert rungs["speedup"].tolist()[1:] == [1.333, 0.375, 4.0, 2.0]
    assert rungs["saved_ms"].tolist()[1:] == [10.0, -50.0, 60.0, 10.0]
    plot = sweep.plot()
    assert plot.table["label"].tolist()[0] == "warmup=0"
    # the same steps as samples for noise_verdict, by label, the running variant left out
    sweep.mark(4, state="RUNNING")
    assert sweep.step_samples() == {
        f"--warmup={i}": [m - 1, m, m + 1] for i, m in enumerate(medians[:4])
    }
    assert os.path.isfile(sweep.path / "comparison.csv")


def test_outlier_rule_needs_both_neighbours_spreads_exceeded():
    # A steady trend is no outlier; a dip below both neighbours' p10 is; ends never are.
    assert outliers([10, 20, 30], [9, 19, 29], [11, 21, 31]) == [False, False, False]
    assert outliers([10, 2, 11], [9, 1, 10], [11, 3, 12]) == [False, True, False]
    assert outliers([2, 10, 11], [1, 9, 10], [3, 11, 12]) == [False, False, False]


def test_rerun_leaves_a_variant_still_queued_or_running_alone(isolated_runs):
    sweep = small().sweep(**{"--warmup": [0, 1, 2, 3]})
    sweep.create()
    for index, state in enumerate(["COMPLETED", "RUNNING", "QUEUED", "LOST"]):
        sweep.mark(index, state=state)
    assert [v.index for v in Sweep.load(sweep.path).pending()] == [3]


def test_compare_runs_needs_both_variants_traces(isolated_runs):
    sweep = small().sweep(**{"--warmup": [0, 1]})
    sweep.create()
    with pytest.raises(SpecError, match=r"variant 0 \(--warmup=0\) has no traces.*profile=True"):
        sweep.compare_runs(0, 1)
    with pytest.raises(SpecError, match="variant 5 is not in this sweep; pass an index 0-1"):
        sweep.compare_runs(0, 5)


def test_profiled_variants_take_their_shares_from_traces_and_diff_op_by_op(isolated_runs):
    sweep = small(profile=True).sweep(**{"--dtype": ["float32", "bfloat16"]}).run()
    table = sweep.compare()
    assert table["breakdown_from"].tolist() == ["traces", "traces"]
    parts = table[["compute_share", "exposed_comm_share", "idle_share"]].sum(axis=1)
    assert ((parts > 0) & (parts <= 1 + 1e-9)).all()  # parts of the step, never more than it
    diff = sweep.compare_runs(0, 1)
    assert diff.attrs["labels"] == ("0: --dtype=float32", "1: --dtype=bfloat16")
    assert {"op"} <= set(diff["kind"])


def test_cli_refuses_a_bad_grid_in_one_line(isolated_runs, capsys):
    assert main(["sweep", "--system", "local", "--vary", "nodes=1,x"]) == 2
    assert capsys.readouterr().err == (
        "hpcprof-kit sweep: field 'nodes' takes whole numbers; 'x' is not one\n"
    )
    assert main(["sweep", "--system", "local"]) == 2
    assert "at least one --vary FIELD=V1,V2" in capsys.readouterr().err
    assert not isolated_runs.exists() or not any(isolated_runs.iterdir())


def test_no_scheduler_here_means_no_sweep_directory(isolated_runs, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    for var in ("SLURM_JOB_ID", "PBS_JOBID", "PBS_NODEFILE"):
        monkeypatch.delenv(var, raising=False)
    sweep = JobSpec(system="slurm").sweep(nodes=[1, 2])
    with pytest.raises(SubmitError, match="sbatch is not on PATH"):
        sweep.run()
    assert sweep.path is None
    assert not isolated_runs.exists() or not any(isolated_runs.iterdir())


def test_cli_sweep_wait_ends_with_the_comparison_sweep_compare_gives(isolated_runs, capsys):
    argv = ["sweep", "--system", "local", "--example", "seqpar", "--ranks-per-node", "1",
            "--binding", "none", "--vary=--dtype=float32,float16", "--wait", "--", *SMALL]  # fmt: skip
    assert main(argv) == 1  # float16 is not a seqpar dtype: that variant fails
    done = capsys.readouterr()
    lines = done.out.splitlines()
    folder = lines[0].removeprefix("sweep ")
    assert lines[1:4] == [
        "    0 COMPLETED  --dtype=float32",
        "    1 FAILED     --dtype=float16",
        f"  1 variant(s) did not complete; run it again with --resume {folder}",
    ]
    assert done.err.endswith(f"written: {folder}/comparison.csv\n")
    assert main(["sweep", "compare", folder]) == 0
    table = capsys.readouterr().out
    assert "float32" in table and "FAILED" in table
    assert done.out == "\n".join(lines[:4]) + "\n\n" + table

    assert main([*argv[: -len(SMALL) - 1], "--json", "--", *SMALL]) == 1
    out = json.loads(capsys.readouterr().out)
    assert [(r["variant"], r["state"]) for r in out["comparison"]] == [(0, "COMPLETED"),
                                                                     (1, "FAILED")]  # fmt: skip
    assert out["comparison"][0]["step_median_ms"] > 0
    assert out["comparison"][1]["step_median_ms"] is None
