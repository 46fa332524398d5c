"""A real Slurm on localhost for the scheduler tests (owned by the jobs work; placeholder)."""

import pytest


@pytest.fixture(scope="session")
def slurm_cluster():
    pytest.skip("the Slurm fixture is not written yet")
