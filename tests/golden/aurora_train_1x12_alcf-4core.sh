#!/bin/bash
#PBS -N hpcprof-train
#PBS -A YOUR_PROJECT
#PBS -q debug
#PBS -l select=1
#PBS -l place=scatter
#PBS -l walltime=00:10:00
#PBS -l filesystems=home:flare
#PBS -k doe
# train on aurora: DDP training of a small Transformer
# Rendered by hpcprof-kit from a JobSpec (spec.json beside it): change the spec, not this file.
set -eo pipefail

# The run directory holds this script, its outputs, traces/, tables/ and timings/.
export HPCPROF_RUN_DIR="${HPCPROF_RUN_DIR:-${PBS_O_WORKDIR:-$PWD}}"
export HPCPROF_SYSTEM=aurora
cd "$HPCPROF_RUN_DIR"
mkdir -p traces tables timings

# Site environment
module load frameworks

# Environment for every rank
export FI_MR_CACHE_MONITOR=userfaultfd
export CCL_PROCESS_LAUNCHER=pmix
export CCL_ATL_TRANSPORT=mpi
export CCL_KVS_MODE=mpi
export TMPDIR=/tmp
export ZE_FLAT_DEVICE_HIERARCHY=FLAT
export CCL_WORKER_AFFINITY=42,43,44,45,46,47,94,95,96,97,98,99

# 1 node(s) x 12 rank(s) per node = 12 rank(s)
mpiexec -n 12 -ppn 12 --cpu-bind list:4-7:8-11:12-15:16-19:20-23:24-27:56-59:60-63:64-67:68-71:72-75:76-79 -l --line-buffer --hostfile "$PBS_NODEFILE" \
    python3 -m hpcprof_kit.apps.train
