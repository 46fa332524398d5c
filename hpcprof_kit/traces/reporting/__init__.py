"""The report of a run: its panes, its findings, as text, JSON or one HTML file; and the
per-rank summaries of a large run made as an MPI job (``mpi_summary``).
"""
