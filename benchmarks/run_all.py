"""Run every benchmark script (benchmarks/bench_*.py) in turn; each prints its own table.

make bench                 # all of them
python benchmarks/run_all.py loader timeline   # only those whose name contains a word
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path


def main(words: list[str]) -> int:
    here = Path(__file__).resolve().parent
    scripts = sorted(here.glob("bench_*.py"))
    if words:
        scripts = [s for s in scripts if any(w in s.stem for w in words)]
    failed = []
    for script in scripts:
        print(f"\n=== {script.stem} ===", flush=True)
        start = time.perf_counter()
        code = subprocess.call([sys.executable, str(script)])
        print(f"--- {script.stem}: exit {code}, {time.perf_counter() - start:.1f} s", flush=True)
        if code:
            failed.append(script.stem)
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
