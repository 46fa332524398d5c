# The two commands: `make demo` and `make test`. Both build .venv first when it is missing.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
KIT    := $(VENV)/bin/hpcprof-kit
EXTRAS ?= local,lab,test

.PHONY: env lock demo test test-quick test-site-torch lint lab bench render validate clean-env

env: $(VENV)/.ready

$(VENV)/.ready: pyproject.toml setup.py env/local/constraints.txt env/local/check_prereqs.sh
	@bash env/local/check_prereqs.sh $(PYTHON)
	@bash env/local/build_venv.sh $(PYTHON) $(VENV) $(EXTRAS)
	@touch $@

# Refresh env/local/constraints.txt to the newest versions, then prove them: make lock clean-env test
lock:
	bash env/local/lock.sh $(PYTHON)

demo: env
	$(KIT) demo

# nbval's options come from the one list in hpcprof_kit/validate/run.py (read when a recipe runs)
NBVAL = $(shell $(PY) -c 'from hpcprof_kit.validate.run import nbval_args; print(*nbval_args("notebooks"))')

# Tests wait on jobs, schedulers and browsers as much as they compute: TEST_WORKERS pytest-xdist
# workers share them out, a module (or a shared resource's group, tests/conftest.py) per worker.
# nbval's notebooks are groups of the same run (a notebook per group, its cells in order, in
# one kernel), so they fill a worker the long groups leave idle; notebooks/conftest.py searches
# what their cells print for the exercises' answers on the way (tests/nbval_hidden.py).
# Three workers on two cores: while one waits (a Slurm walltime, a hung notebook's timeout, a
# job's queue), two compute. The suite kept the cores 72 % busy with two, 90 % with three.
TEST_WORKERS ?= 3
XDIST = -n $(TEST_WORKERS)
# `make test CPU_REPORT=FILE`: each test's wall and CPU seconds too (tests/cpu_time.py)
CPU_REPORT ?=

test: env
	$(VENV)/bin/ruff check .
	KINETO_LOG_LEVEL=6 $(PY) -m pytest -p no:cacheprovider $(XDIST) --dist loadgroup --no-loadscope-reorder --durations=25 $(if $(CPU_REPORT),--cpu-report $(CPU_REPORT)) $(NBVAL) tests notebooks
	KINETO_LOG_LEVEL=6 $(PY) -m pytest -p no:cacheprovider $(XDIST) --doctest-modules hpcprof_kit

# The inner loop: ruff, then every test that starts no job, ranks, scheduler or browser
# (tests/conftest.py, --quick). Not a replacement for `make test`, which CI runs.
test-quick: env
	$(VENV)/bin/ruff check .
	KINETO_LOG_LEVEL=6 $(PY) -m pytest -p no:cacheprovider -q $(XDIST) --dist loadgroup --quick tests

# CI's second leg: the sites' oldest stack (Python 3.10, torch 2.8.0, the real IPEX 2.8.0 for the
# CPU) in its own .venv-site; the demo and the torch-dependent test files there.
test-site-torch:
	bash env/site_torch/run_leg.sh

lint: env
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check hpcprof_kit tests

lab: env
	$(PY) -m ipykernel install --user --name hpcprof-kit --display-name "Python (hpcprof-kit)" --env KINETO_LOG_LEVEL 6
	KINETO_LOG_LEVEL=6 $(VENV)/bin/jupyter lab notebooks

validate: env
	KINETO_LOG_LEVEL=6 $(KIT) validate

render: env
	$(KIT) render --all jobs/

bench: env
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) benchmarks/run_all.py

clean-env:
	rm -rf $(VENV)
