"""The site rehearsal: run an Aurora or Polaris job script here the way the site would start it.

A stand-in, and it says so in every line: PBS Pro, Lmod and Cray PALS are modelled at their
boundary by a *twin* (:mod:`hpcprof_kit.rehearsal.twin`) built from the system record; ranks
run on this machine's CPUs with Hydra underneath; there is no GPU and no fabric. What it proves:
the script's directives pass PBS Pro's and ALCF's submit rules, its modules exist, the Python
environment holding the kit is active in a clean batch environment, PALS takes its launch line,
every rank starts, the tracers leave output for exactly the ranks the seeds' rules select, and
the traces load.

>>> from hpcprof_kit.rehearsal import rehearse              # doctest: +SKIP
>>> print(rehearse(system="aurora"))                       # doctest: +SKIP
"""

from hpcprof_kit.rehearsal.run import PREFIX, Rehearsal, Stage, rehearse

__all__ = ["PREFIX", "Rehearsal", "Stage", "rehearse"]
