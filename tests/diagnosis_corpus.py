"""The corpus of problem runs lives in the package now (``hpcprof_kit.traces.corpus``: the
capstone notebook hands a learner one of its runs); this name stays for the tests and
``benchmarks/bench_diagnosis.py`` that import it from here."""

from hpcprof_kit.traces.corpus import (  # noqa: F401
    BASE_NS,
    FLAVOURS,
    KINDS,
    LOADER,
    NOT_ON_XPU,
    Problem,
    Run,
    corpus_run,
)
