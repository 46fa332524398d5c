#!/usr/bin/env bash
# Checks what `make env` needs before pip starts, so a missing piece is one clear line.
set -u
py=${1:-python3}
fail() { echo "hpcprof-kit env: $1" >&2; exit 1; }

command -v "$py" >/dev/null 2>&1 || fail "no '$py' on PATH; install Python >= 3.10 or run 'make env PYTHON=/path/to/python3'."
"$py" -c 'import sys; sys.exit(sys.version_info < (3, 10))' \
  || fail "$("$py" -V 2>&1) is too old; the kit needs Python >= 3.10 (run 'make env PYTHON=python3.11')."
"$py" -c 'import venv, ensurepip' 2>/dev/null \
  || fail "'$py' has no venv/ensurepip module; on Debian: 'apt-get install python3-venv'."
# mpi4py builds from source when no wheel fits; that needs a C compiler.
command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1 \
  || echo "hpcprof-kit env: warning: no C compiler (cc/gcc); if pip must build mpi4py it will fail: 'apt-get install build-essential'." >&2
exit 0
