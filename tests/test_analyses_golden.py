"""Every analysis gives, to the nanosecond, the tables it gave before it was made linear in the
number of events (issue #15): real traces and synthetic multi-rank runs against golden files.

The golden files under ``tests/golden/analyses/`` were written once by the per-rank code;
``HPCPROF_WRITE_GOLDEN=1 pytest tests/test_analyses_golden.py`` writes them again (only do
that for a change of results you mean), with ``versions.json``: the libraries that wrote them.
Rows are ordered by value and then by name, so the files hold across library versions and
whatever the order of the input rows (a test shuffles them).
"""

from __future__ import annotations

import gzip
import json
import os
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from hpcprof_kit import traces
from hpcprof_kit import traces as A
from hpcprof_kit.traces.analyses.ops import _thread_codes

from must_have import missing

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "golden" / "analyses"
FIXTURES = REPO / "tests" / "fixtures" / "traces"
SHARED = REPO.parent / "shared" / "traces" / "hta"
WRITE = os.environ.get("HPCPROF_WRITE_GOLDEN") == "1"
sys.path.insert(0, str(REPO / "benchmarks"))

# name -> files (relative to the shared or fixture folder) loaded as one table
SHARED_RUNS = {
    "cuda_1rank": ["cuda_1rank_ns_resolution.json.gz"],
    "cuda_2of128": ["cuda_rank0_of_128.json.gz", "cuda_rank1_of_128.json.gz"],
    "rocm": ["rocm_mi250_1rank.json.gz"],
    "cpu_rank34": ["cpu_rank34_of_300.json.gz"],
    "cpu_nodist": ["cpu_no_distributed_info.json.gz"],
}
FIXTURE_RUNS = {
    "xpu": ["kineto_xpu-1-of-2.json"],
    "myapp": ["myapp.4321.1.json"],
    "string_pids": ["string_pids.json"],
    "wide_ints": ["wide_ints.json"],
}
SYNTHETIC_RUNS = {"nccl": "nccl", "gloo": "gloo", "mixed": "mixed"}
COMPARE = [("nccl", "gloo"), ("cuda_2of128", "cuda_1rank"), ("cpu_nodist", "cpu_rank34")]


def _quiet_load(paths) -> pd.DataFrame:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return traces.load([str(p) for p in paths], cache=False, workers=1)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, pd.DataFrame]:
    from bench_analyses_scale import write_run

    out = {}
    for name, files in FIXTURE_RUNS.items():
        out[name] = _quiet_load([FIXTURES / f for f in files])
    if SHARED.is_dir():
        for name, files in SHARED_RUNS.items():
            out[name] = _quiet_load([SHARED / f for f in files])
    for name, backend in SYNTHETIC_RUNS.items():
        folder = tmp_path_factory.mktemp(f"synthetic-{name}")
        out[name] = _quiet_load(write_run(folder, 6, 0.05, backend))
    return out


def _self_times(df: pd.DataFrame) -> pd.DataFrame:
    ops = df[(df["cat"].astype(str) == "cpu_op").to_numpy()]
    ts, dur = ops["ts_ns"].to_numpy(), ops["dur_ns"].to_numpy()
    return pd.DataFrame({"self_ns": A.self_times(ts, dur, _thread_codes(ops))})


def outputs(name: str, df: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """Every analysis of one table, by name."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = {
            "step_spans": A.step_spans(df),
            "step_breakdown": A.step_breakdown(df),
            "comm_overlap": A.comm_overlap(df),
            "rank_steps": A.rank_steps(df),
            "top_ops": A.top_ops(df, n=10_000),
            "top_ops_20": A.top_ops(df),
            "top_kernels": A.top_kernels(df, n=10_000),
            "user_ranges": A.user_ranges(df, n=10_000),
            "self_times": _self_times(df),
        }
    names = pd.concat([out["top_ops"].index.to_series(), out["top_kernels"].index.to_series()])
    for i, op in enumerate(names.head(2)):
        table = A.same_name(df, op)
        out[f"same_name_{i}"] = table
        out[f"same_name_{i}_occurrences"] = table.attrs["occurrences"]
        table.attrs = {}
    return out


def _cell(value):
    if isinstance(value, (np.integer, np.floating, np.bool_)):
        return value.item()
    return value


def _index(index: pd.Index) -> dict:
    return {
        "dtype": str(index.dtype),
        "names": list(index.names),
        "values": [_cell(v) for v in index.tolist()],
    }


def to_golden(df: pd.DataFrame) -> dict:
    """A frame as JSON-able data that keeps dtypes, labels and every bit of every float."""
    cols = []
    for i in range(df.shape[1]):
        s = df.iloc[:, i]
        col = {"dtype": str(s.dtype), "values": [_cell(v) for v in s.tolist()]}
        if isinstance(s.dtype, pd.CategoricalDtype):
            col["categories"] = [_cell(v) for v in s.cat.categories.tolist()]
        cols.append(col)
    return {"index": _index(df.index), "columns": _index(df.columns), "data": cols}


def _build_index(spec: dict) -> pd.Index:
    return pd.Index(spec["values"], dtype=spec["dtype"], name=spec["names"][0])


def from_golden(spec: dict) -> pd.DataFrame:
    data = {}
    for i, col in enumerate(spec["data"]):
        if col["dtype"] == "category":
            dtype = pd.CategoricalDtype(col["categories"])
            data[i] = pd.Series(pd.Categorical(col["values"], dtype=dtype))
        else:
            values = [np.nan if v is None else v for v in col["values"]]
            data[i] = pd.Series(values, dtype=col["dtype"])
    df = pd.DataFrame(data)
    df.index = _build_index(spec["index"])
    df.columns = _build_index(spec["columns"])
    return df


def _versions() -> dict[str, str]:
    return {"python": sys.version.split()[0], "numpy": np.__version__, "pandas": pd.__version__}


def _check(key: str, actual: pd.DataFrame) -> None:
    path = GOLDEN / f"{key}.json.gz"
    if WRITE:
        GOLDEN.mkdir(parents=True, exist_ok=True)
        # mtime=0: the same tables give the same bytes
        path.write_bytes(gzip.compress(json.dumps(to_golden(actual)).encode(), mtime=0))
        (GOLDEN / "versions.json").write_text(json.dumps(_versions(), indent=1) + "\n")
    expected = from_golden(json.loads(gzip.decompress(path.read_bytes())))
    wrote = json.loads((GOLDEN / "versions.json").read_text())
    pd.testing.assert_frame_equal(
        actual, expected, check_exact=True, obj=f"{key} (golden by {wrote}, this run {_versions()})"
    )


def test_golden_round_trip_is_exact():
    df = pd.DataFrame({"a": [0.1 + 0.2, np.nan], "b": pd.Categorical(["x", "y"])}, index=[3, 4])
    pd.testing.assert_frame_equal(from_golden(json.loads(json.dumps(to_golden(df)))), df)


@pytest.mark.parametrize("name", [*FIXTURE_RUNS, *SHARED_RUNS, *SYNTHETIC_RUNS])
def test_analyses_match_golden(runs, name):
    if name not in runs:
        missing(f"{SHARED} is absent: the shared third-party traces are not here")
    for what, table in outputs(name, runs[name]).items():
        _check(f"{name}__{what}", table)


@pytest.mark.parametrize(("a", "b"), COMPARE)
def test_compare_runs_matches_golden(runs, a, b):
    if a not in runs or b not in runs:
        missing(f"{SHARED} is absent: the shared third-party traces are not here")
    diff = A.compare_runs(runs[a], runs[b])
    steps = diff.attrs["steps"]
    diff.attrs = {}
    _check(f"compare__{a}__{b}", diff)
    _check(f"compare__{a}__{b}__steps", steps)


def _shuffled(df: pd.DataFrame, seed: int) -> pd.DataFrame:
    order = np.random.default_rng(seed).permutation(len(df))
    out = df.iloc[order].reset_index(drop=True)
    out.attrs = df.attrs
    return out


@pytest.mark.parametrize("name", ["cuda_2of128", "xpu", "nccl"])
def test_the_tables_do_not_depend_on_the_order_of_the_input_rows(runs, name):
    if name not in runs:
        missing(f"{SHARED} is absent: the shared third-party traces are not here")
    df = runs[name]
    names = ("top_ops", "top_ops_20", "top_kernels", "user_ranges", "step_breakdown")
    want = {k: v for k, v in outputs(name, df).items() if k in names}
    for seed in (1, 2, 3):
        got = outputs(name, _shuffled(df, seed))
        for what, table in want.items():
            pd.testing.assert_frame_equal(got[what], table, check_exact=True, obj=f"{what} {seed}")
    if "cuda_1rank" in runs:
        base = A.compare_runs(df, runs["cuda_1rank"])
        again = A.compare_runs(_shuffled(df, 4), _shuffled(runs["cuda_1rank"], 5))
        pd.testing.assert_frame_equal(again, base, check_exact=True)
