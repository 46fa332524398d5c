"""What serves big runs, beside the analyses a teacher reads first (``hpcprof_kit.traces``):

- ``summary``, ``summary_store``: per-rank summaries (step breakdown, step times, top ops and
  kernels, collectives) written once and combined, so a thousand ranks are never one table;
- ``mpi_summary``: that analysis as an MPI job, one rank file per process;
- ``cache``: a columnar copy of each loaded trace, so the second load is near instant;
- ``_scan.c``: the compiled scanner that decodes the plain case of a trace file fast (optional:
  the loader decodes everything with msgspec without it).

See ``docs/analysis-at-scale.md``.
"""
