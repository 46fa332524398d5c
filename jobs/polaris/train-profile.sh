#!/bin/bash
#PBS -N hpcprof-train-profile
#PBS -A YOUR_PROJECT
#PBS -q debug
#PBS -l select=1:system=polaris
#PBS -l place=scatter
#PBS -l walltime=00:10:00
#PBS -l filesystems=home:eagle
#PBS -k doe
# train on polaris: DDP training of a small Transformer
# Rendered by hpcprof-kit from a JobSpec (spec.json beside it): change the spec, not this file.
set -eo pipefail

# The run directory holds this script, its outputs, traces/, tables/ and timings/.
export HPCPROF_RUN_DIR="${HPCPROF_RUN_DIR:-${PBS_O_WORKDIR:-$PWD}}"
export HPCPROF_SYSTEM=polaris
cd "$HPCPROF_RUN_DIR"
mkdir -p traces tables timings

# Site environment
module use /soft/modulefiles
module load conda
conda activate

# Environment for every rank
export NCCL_NET_GDR_LEVEL=PHB
export NCCL_CROSS_NIC=1
export NCCL_COLLNET_ENABLE=1
export NCCL_NET='AWS Libfabric'
export FI_CXI_DISABLE_HOST_REGISTER=1
export FI_MR_CACHE_MONITOR=userfaultfd
export FI_CXI_DEFAULT_CQ_SIZE=131072

# 1 node(s) x 4 rank(s) per node = 4 rank(s)
mpiexec -n 4 -ppn 4 --cpu-bind list:24-31:16-23:8-15:0-7 -l --line-buffer --hostfile "$PBS_NODEFILE" \
    python3 -m hpcprof_kit.apps.train --profile
