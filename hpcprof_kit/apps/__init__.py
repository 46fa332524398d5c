"""Runnable workloads, started once per rank by the launcher.

- ``python -m hpcprof_kit.apps.train``  - the DDP Transformer on synthetic data (ALCF "hello DDP")
- ``python -m hpcprof_kit.apps.seqpar`` - sequence-parallel all-gather/matmul/reduce-scatter loop

Each prints one banner line per rank (``rank=R local_rank=L world=W nodes=N device=D
backend=B host=H``) and writes ``<app>-<rank>-of-<world>.json`` timings (docs/architecture.md).
"""
