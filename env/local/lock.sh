#!/usr/bin/env bash
# Refreshes env/local/constraints.txt: the newest versions the registry offers for the kit and its
# extras, installed into a scratch venv and written down exactly. Then prove them:
#   bash env/local/lock.sh && make clean-env test
set -euo pipefail
py=${1:-python3}; extras=${2:-local,lab,test}
cd "$(dirname "$0")/../.."
out=env/local/constraints.txt
scratch=$(mktemp -d); trap 'rm -rf "$scratch"' EXIT
"$py" -m venv "$scratch/venv"
echo "hpcprof-kit lock: resolving .[$extras] into a scratch venv (log: $scratch/pip.log)" >&2
"$scratch/venv/bin/python" -m pip install --progress-bar off ".[$extras]" >"$scratch/pip.log" 2>&1 \
  || { tail -n 5 "$scratch/pip.log" >&2; exit 1; }
{
  echo "# The exact versions 'make env' installs (pip -c), written by env/local/lock.sh with"
  echo "# $("$scratch/venv/bin/python" -V 2>&1). Refresh: bash env/local/lock.sh && make clean-env test"
  "$scratch/venv/bin/python" -m pip freeze --exclude hpcprof_kit \
    | sed -E 's/^(torch==[0-9.]+)\+cpu$/\1/' | LC_ALL=C sort -f
} >"$out.part"
mv "$out.part" "$out"
echo "hpcprof-kit lock: wrote $out ($(grep -vc '^#' "$out") packages)" >&2
