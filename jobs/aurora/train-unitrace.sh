#!/bin/bash
#PBS -N hpcprof-train-unitrace
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

# Vendor tracer wrapper (unitrace): traces rank(s) 0, runs the others plainly.
cat > "$HPCPROF_RUN_DIR/tracer.sh" <<'HPCPROF_TRACER_EOF'
#!/usr/bin/env bash
# hpcprof-kit tracer wrapper: unitrace on aurora
# Intel unitrace (pti-gpu): host, Level Zero, SYCL, oneCCL, oneDNN and ITT timelines.
# Traces the ranks whose local rank is PROFRANK and whose global rank is below RANKCUTOFF
# (empty: no cutoff); every other rank runs the command plainly.
# Usage: bash tracer.sh <command> [args...]   (override PROFRANK/RANKCUTOFF via env)
set -euo pipefail
if (( $# == 0 )); then echo "usage: bash tracer.sh <command> [args...]" >&2; exit 2; fi

PROFRANK="${PROFRANK-0}"
RANKCUTOFF="${RANKCUTOFF-}"
rank="${RANK:-${PMIX_RANK:-${PALS_RANKID:-${PMI_RANK:-${OMPI_COMM_WORLD_RANK:-${SLURM_PROCID:-0}}}}}}"
local_rank="${LOCAL_RANK:-${PALS_LOCAL_RANKID:-${PMIX_LOCAL_RANK:-${PMI_LOCAL_RANK:-${OMPI_COMM_WORLD_LOCAL_RANK:-${MPI_LOCALRANKID:-${SLURM_LOCALID:-0}}}}}}}"

if [[ "$local_rank" != "$PROFRANK" ]] || { [[ -n "$RANKCUTOFF" ]] && (( rank >= RANKCUTOFF )); }; then
    exec "$@"
fi

run_dir="${HPCPROF_RUN_DIR:-$PWD}"
run="$(basename "$run_dir")"
out="$run_dir/traces/unitrace"
mkdir -p "$out"
# PyTorch ops reach unitrace as ITT tasks: the kit's profiling helpers honour this
# and wrap the loop in torch.autograd.profiler.emit_itt().
export HPCPROF_EMIT_ITT=1
report="$out/${run}_rank${rank}"
echo "hpcprof-kit: unitrace traces rank $rank (local rank $local_rank) into $out" >&2
exec unitrace --chrome-mpi-logging --chrome-sycl-logging --chrome-device-logging --chrome-ccl-logging --chrome-call-logging --chrome-dnn-logging --device-timing --host-timing --ccl-summary-report --output-dir-path "$out" --output "${report}.txt" "$@"
HPCPROF_TRACER_EOF

# 1 node(s) x 12 rank(s) per node = 12 rank(s)
mpiexec -n 12 -ppn 12 --cpu-bind list:4-7:8-11:12-15:16-19:20-23:24-27:56-59:60-63:64-67:68-71:72-75:76-79 -l --line-buffer --hostfile "$PBS_NODEFILE" \
    bash "$HPCPROF_RUN_DIR/tracer.sh" python3 -m hpcprof_kit.apps.train
