"""nbval's run of the notebooks also searches what each cell prints for the answers of the
exercise checks below it (tests/nbval_hidden.py), and counts what each drawing cell shows
against the browser table (tests/nbval_shown.py): one execution of each notebook serves all."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import nbval_shown  # noqa: E402
from nbval_hidden import pytest_report_header, pytest_runtest_call  # noqa: E402, F401


def pytest_configure(config):
    config.pluginmanager.register(nbval_shown, "nbval_shown")
