"""A missing component skips on a laptop and fails in CI (HPCPROF_REQUIRE_ALL=1)."""

from __future__ import annotations

import pytest

from must_have import REQUIRE_ALL_VAR, missing


def test_missing_component_skips_by_default(monkeypatch):
    monkeypatch.delenv(REQUIRE_ALL_VAR, raising=False)
    with pytest.raises(pytest.skip.Exception, match="chromium not installed"):
        missing("chromium not installed")


def test_missing_component_fails_when_everything_is_required(monkeypatch):
    monkeypatch.setenv(REQUIRE_ALL_VAR, "1")
    with pytest.raises(
        pytest.fail.Exception, match=r"chromium not installed \(HPCPROF_REQUIRE_ALL=1"
    ):
        missing("chromium not installed")
