#!/usr/bin/env bash
# The site-torch leg of CI: the kit on the oldest Python and torch a site gives it (Python 3.10,
# torch 2.8.0, as Polaris's conda/2025-09-25 and the ATPESC 2025 environment), with the real
# intel-extension-for-pytorch 2.8.0 (CPU build). Builds its own venv (.venv-site, git-ignored),
# then runs the demo and the torch-dependent test files of the normal suite there.
#
#   bash env/site_torch/run_leg.sh          (or: make test-site-torch)
#
# SITE_PYTHON=/path/to/python3.10 picks the interpreter; else python3.10 on PATH, else pyenv's.
set -euo pipefail
cd "$(dirname "$0")/../.."

venv=${SITE_VENV:-.venv-site}
# SITE_WHEELS: where the downloaded wheels are kept between runs (outside the checkout, so a
# fresh clone reuses them)
wheels=${SITE_WHEELS:-${XDG_CACHE_HOME:-$HOME/.cache}/hpcprof-kit/site-torch-wheels}
torch_version=2.8.0
ipex_version=2.8.0
say() { echo "site-torch leg: $*" >&2; }

is_310() { [ -n "$1" ] && "$1" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 10))' 2>/dev/null; }

find_python() {
  local candidate root
  for candidate in "${SITE_PYTHON:-}" "$(command -v python3.10 || true)"; do
    if is_310 "$candidate"; then echo "$candidate"; return 0; fi
  done
  if command -v pyenv >/dev/null 2>&1; then
    candidate="$(pyenv prefix 3.10 2>/dev/null | head -1 || true)/bin/python3.10"
    if is_310 "$candidate"; then echo "$candidate"; return 0; fi
    root=$(pyenv root)
    for candidate in "$root"/versions/3.10*/bin/python3.10; do
      if is_310 "$candidate"; then echo "$candidate"; return 0; fi
    done
  fi
  return 1
}

# The same test files as the main leg, those that need torch (the rest do not change with it).
TEST_FILES=(
  tests/test_porting.py tests/test_porting_versions.py tests/test_device.py
  tests/test_cli_devices_port.py tests/test_ipex_real.py
  tests/test_profiler_as_taught.py tests/test_profiler_conventions.py
  tests/test_profiler_crash.py tests/test_profiler_factory.py tests/test_profiler_lazy.py
  tests/test_profiler_public_api.py tests/test_profiler_script_check.py
  tests/test_capture.py tests/test_timing.py tests/test_train_sync_steps.py
  tests/test_dist.py tests/test_dist_join.py tests/test_dist_rendezvous.py
  tests/test_apps.py tests/test_jobs_local.py tests/test_demo.py tests/test_schedule.py
  tests/test_ondemand.py tests/test_practitioner_path.py
)

python=$(find_python) || {
  say "no Python 3.10 found (python3.10 on PATH, pyenv's versions/3.10*); install one, or set SITE_PYTHON=/path/to/python3.10"
  exit 1
}
stamp="$venv/.ready-torch-$torch_version-ipex-$ipex_version"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ "$0" -nt "$stamp" ]; then
  start=$SECONDS
  rm -rf "$venv"
  "$python" -m venv "$venv"
  say "installing torch==$torch_version, intel-extension-for-pytorch==$ipex_version, the kit into $venv ($("$venv/bin/python" -V)); log in $venv/pip.log"
  # PyPI's Linux torch 2.8.0 is the CUDA build; with no GPU it runs on the CPU, as the CPU build.
  # Its wheels and their CUDA libraries (about 3 GB) are kept in $wheels, downloaded on the
  # machine's first run only: pip keeps no copy of what it downloads here.
  mkdir -p "$wheels"
  big=("torch==$torch_version" "intel-extension-for-pytorch==$ipex_version" "mpich>=4.2" "mpi4py>=4.0")
  pip_quiet() { "$venv/bin/python" -m pip "$1" --progress-bar off "${@:2}" >>"$venv/pip.log" 2>&1; }
  if ! pip_quiet install --no-index --find-links "$wheels" "${big[@]}"; then
    say "downloading torch==$torch_version and what it needs into $wheels (once per machine)"
    if ! { pip_quiet download --dest "$wheels" "${big[@]}" &&
           pip_quiet install --no-index --find-links "$wheels" "${big[@]}"; }; then
      say "pip failed; last lines of $venv/pip.log:"; tail -n 5 "$venv/pip.log" >&2
      exit 1
    fi
  fi
  if ! pip_quiet install -e ".[test]"; then
    say "pip failed; last lines of $venv/pip.log:"; tail -n 5 "$venv/pip.log" >&2
    exit 1
  fi
  touch "$stamp"
  say "environment built in $((SECONDS - start)) s"
fi

export HPCPROF_REQUIRE_ALL=${HPCPROF_REQUIRE_ALL:-1} HPCPROF_REQUIRE_IPEX=1 KINETO_LOG_LEVEL=6
export PATH="$PWD/$venv/bin:$PATH"
"$venv/bin/python" -c 'import sys, torch, intel_extension_for_pytorch as ipex
print(f"site-torch leg: Python {sys.version.split()[0]}, torch {torch.__version__}, ipex {ipex.__version__}", file=sys.stderr)'
start=$SECONDS
"$venv/bin/hpcprof-kit" demo
# Two workers, grouped as in the main leg (tests/conftest.py): the tests wait on ranks and jobs.
"$venv/bin/python" -m pytest -p no:cacheprovider -n "${TEST_WORKERS:-2}" --dist loadgroup \
  --no-loadscope-reorder --durations=10 "${TEST_FILES[@]}"
say "demo and tests took $((SECONDS - start)) s"
