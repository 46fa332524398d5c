"""hpcprof_kit: profile PyTorch training on HPC nodes, from a notebook or a script."""

__version__ = "0.1.0"
