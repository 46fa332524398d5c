"""The report's JSON of many inputs, one file each, to compare two checkouts byte for byte.

A refactor of ``hpcprof_kit/traces`` must leave every report as it was. This writes, into OUT,
one JSON file per input with the report of the table (``report``), of the same folder read
again from its cache copies (``report_cached``, corpus runs only) and of its per-rank summaries
(``mpi``: ``report_from_summary(summarise(df))``, what ``traces report --mpi`` builds), or the
error a refused input gets. Inputs: every trace file and trace folder of ``../shared/traces``
and ``tests/fixtures/traces``, two ranks of one shared job, and N corpus runs
(``traces/corpus.py``, seeds 0..N-1, written under OUT's sibling ``corpus`` folder).

    git stash; python benchmarks/report_snapshot.py /tmp/before; git stash pop
    python benchmarks/report_snapshot.py /tmp/after
    diff -r /tmp/before /tmp/after && echo "every report unchanged"

Paths go into the reports (their sources), so run both sides from the same checkout folder
and with the same OUT's parent. Prints a line per 20 inputs; takes about 2.5 min for 282 inputs
on two cores.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = (REPO / ".." / "shared" / "traces").resolve()
FIXTURES = REPO / "tests" / "fixtures" / "traces"
TRACE_SUFFIXES = (".json", ".json.gz")


def inputs() -> list[tuple[str, object]]:
    """(label, path or list of paths) of every input, in a fixed order."""
    out: list[tuple[str, object]] = []
    for root, kind in ((SHARED, "shared"), (FIXTURES, "fixture")):
        if not root.is_dir():
            continue
        for p in sorted(root.rglob("*")):
            holds = p.is_dir() and any(q.name.endswith(TRACE_SUFFIXES) for q in p.iterdir())
            if holds or (p.is_file() and p.name.endswith(TRACE_SUFFIXES)):
                out.append((kind, p))
        if kind == "shared" and (root / "hta").is_dir():
            pair = [root / "hta" / f"cuda_rank{r}_of_128.json.gz" for r in (0, 1)]
            out.append(("shared-pair", pair))
    return out


def _name(label: str, item: object) -> str:
    text = str(item).replace(str(REPO), "").replace(str(SHARED), "shared")
    return f"{label}__" + "".join(c if c.isalnum() or c in "-." else "_" for c in text)[:150]


def _one(job: tuple[str, object, Path]) -> str:
    label, item, out = job
    from hpcprof_kit.traces import load
    from hpcprof_kit.traces.reporting import report as rr
    from hpcprof_kit.traces.view.summary import summarise

    warnings.simplefilter("ignore")
    result: dict[str, str] = {}
    try:
        if label == "corpus":
            from hpcprof_kit.traces.corpus import corpus_run

            folder = out.parent / "corpus" / f"seed-{item}"
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            corpus_run(int(item)).write(folder)
            result["report"] = rr.report(folder).to_json()
            result["report_cached"] = rr.report(folder).to_json()
            df = load(folder, cache=False)
            name = f"corpus__{int(item):03d}"
        else:
            df = load(item, cache=False)
            result["report"] = rr.report(df).to_json()
            name = _name(label, item)
        result["mpi"] = rr.report_from_summary(summarise(df)).to_json()
    except Exception as exc:  # a refused input is part of what is compared
        result["error"] = f"{type(exc).__name__}: {exc}"
        name = _name(label, item) if label != "corpus" else f"corpus__{int(item):03d}"
    (out / f"{name}.json").write_text(json.dumps(result, sort_keys=True))
    return name


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", type=Path, help="a new folder for the JSON files")
    parser.add_argument("--corpus", type=int, default=200, help="corpus runs (default 200)")
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    args = parser.parse_args()
    if args.out.exists() and any(args.out.iterdir()):
        parser.error(f"{args.out} is not empty; give a new folder, nothing is overwritten")
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = [(label, item, args.out) for label, item in inputs()]
    jobs += [("corpus", seed, args.out) for seed in range(args.corpus)]
    start = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        for i, name in enumerate(pool.map(_one, jobs)):
            if i % 20 == 0:
                print(f"{i:4d}/{len(jobs)} {name} {time.perf_counter() - start:.0f} s", flush=True)
    print(f"{len(jobs)} reports in {args.out}, {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
