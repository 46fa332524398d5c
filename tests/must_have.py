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


def required() -> bool:
    """True when every component must be present (CI)."""
    return os.environ.get(REQUIRE_ALL_VAR, "") not in ("", "0")


def missing(reason: str) -> None:
    """Skip with ``reason``; fail instead when :func:`required`."""
    if required():
        pytest.fail(f"{reason} ({REQUIRE_ALL_VAR}=1: a missing component is a failure)")
    pytest.skip(reason)
