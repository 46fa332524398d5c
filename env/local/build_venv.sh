#!/usr/bin/env bash
# Builds the local virtual environment: CPU torch (pinned), Hydra mpiexec, the kit in editable mode.
# pip's full output goes to <venv>/pip.log; on failure one line says what is missing and how to fix it.
set -u
py=${1:-python3}; venv=${2:-.venv}; extras=${3:-local,lab,test}
say() { echo "hpcprof-kit env: $*" >&2; }

if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import torch' 2>/dev/null; then
  have=$("$venv/bin/python" -c 'import torch; print(torch.__version__)')
  case "$have" in
    2.13.0*) ;;
    *) say "$venv already holds torch $have, not the CPU build 2.13.0 this recipe pins; remove it ('make clean-env') or build elsewhere ('make env VENV=.venv-kit')."; exit 1 ;;
  esac
fi

[ -x "$venv/bin/python" ] || "$py" -m venv "$venv" || { say "could not create $venv with $py"; exit 1; }
log="$venv/pip.log"
# The locked versions (env/local/constraints.txt, refreshed by env/local/lock.sh) hold for the
# Python they were resolved with; another Python gets the newest versions pyproject.toml allows.
lock=env/local/constraints.txt; pin=()
locked_py=$(sed -nE 's/^# Python ([0-9]+\.[0-9]+).*/\1/p' "$lock" 2>/dev/null | head -1)
venv_py=$("$venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ -n "$locked_py" ] && [ "$locked_py" = "$venv_py" ]; then
  pin=(-c "$lock")
else
  say "$lock was written for Python ${locked_py:-?}, this is $venv_py: installing unpinned versions"
fi
echo "hpcprof-kit env: installing into $venv (extras: $extras${pin:+, versions from $lock}); log in $log" >&2
if ! "$venv/bin/python" -m pip install --progress-bar off "${pin[@]}" -e ".[$extras]" >"$log" 2>&1; then
  if grep -qiE "Failed to establish|Temporary failure in name resolution|Network is unreachable|ConnectTimeout|Max retries exceeded" "$log"; then
    say "no network to the package registry; connect, or point pip at a mirror (PIP_INDEX_URL), then 'make env'."
  elif grep -qiE "No matching distribution found for torch|Could not find a version that satisfies the requirement torch" "$log"; then
    say "torch==2.13.0 (CPU) is not available to pip here; add its wheel with PIP_FIND_LINKS=/dir/with/wheel, then 'make env'."
  elif grep -qiE "gcc: not found|command 'gcc' failed|error: command '.*cc' failed|No such file or directory: 'cc'|compiler" "$log"; then
    say "a package needs a C compiler and none works; 'apt-get install build-essential python3-dev', then 'make env'."
  elif grep -qiE "No matching distribution found for ([A-Za-z0-9_.-]+)" "$log"; then
    pkg=$(grep -oiE "No matching distribution found for [A-Za-z0-9_.=<>-]+" "$log" | head -1 | awk '{print $NF}')
    say "pip cannot find '$pkg' in the configured registries; check PIP_INDEX_URL / network, then 'make env'."
  else
    say "pip failed; last lines of $log:"; tail -n 5 "$log" >&2
  fi
  exit 1
fi
"$venv/bin/python" -c 'import torch, sys; sys.exit(0 if torch.__version__.startswith("2.13.0") else 1)' 2>/dev/null \
  || { case ",$extras," in *,local,*) say "torch in $venv is not 2.13.0 after install; see $log"; exit 1;; esac; }
echo "hpcprof-kit env: ready ($("$venv/bin/python" -V), $venv)" >&2
