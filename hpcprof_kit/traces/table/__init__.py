"""The one trace table: its columns (``schema``), ``load`` over many files and ranks, the
arguments of its rows, its rows' order. Imports only ``read``.
"""
