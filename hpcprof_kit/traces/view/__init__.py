"""The run prepared once a report (``run_view.RunView``), read by every pane and every rule: the
step breakdown, the signals the rules read, the host's waits, the device's idle split; of a
trace table, or of per-rank summaries (``summary``) for an ``--mpi`` report.
"""
