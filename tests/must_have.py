"""Skips that cannot hide a missing component in CI.

A test that needs something this machine may lack (the Slurm binaries, root for slurmd,
Chromium, the shared third-party traces) calls :func:`missing` instead of ``pytest.skip``. On a
laptop that skips with the reason; with ``HPCPROF_REQUIRE_ALL=1`` (``.ci/run`` sets it) it
fails, so a CI run that lost a component says so instead of passing with fewer tests.
"""

from __future__ import annotations

import os

import pytest

REQUIRE_ALL_VAR = "HPCPROF_REQUIRE_ALL"
# The real intel-extension-for-pytorch: only CI's site-torch leg has it (and sets this).
REQUIRE_IPEX_VAR = "HPCPROF_REQUIRE_IPEX"


def required(var: str = REQUIRE_ALL_VAR) -> bool:
    """True when every component must be present (CI)."""
    return os.environ.get(var, "") not in ("", "0")


def missing(reason: str, var: str = REQUIRE_ALL_VAR) -> None:
    """Skip with ``reason``; fail instead when :func:`required` (for ``var``)."""
    if required(var):
        pytest.fail(f"{reason} ({var}=1: a missing component is a failure)")
    pytest.skip(reason)
