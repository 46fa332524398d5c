#!/bin/bash
# No scheduler: the kit's local backend (or you) runs this with bash on this machine.
# seqpar on local: sequence-parallel matmuls
# Rendered by hpcprof-kit from a JobSpec (spec.json beside it): change the spec, not this file.
set -eo pipefail

# The run directory holds this script, its outputs, traces/, tables/ and timings/.
export HPCPROF_RUN_DIR="${HPCPROF_RUN_DIR:-$PWD}"
export HPCPROF_SYSTEM=local
cd "$HPCPROF_RUN_DIR"
mkdir -p traces tables timings

# 1 node(s) x 2 rank(s) per node = 2 rank(s)
mpiexec -n 2 \
    python3 -m hpcprof_kit.apps.seqpar
