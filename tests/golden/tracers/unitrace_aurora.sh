#!/usr/bin/env bash
# hpcprof-kit tracer wrapper: unitrace on aurora
# Intel unitrace (pti-gpu): host, Level Zero, SYCL, oneCCL, oneDNN and ITT timelines.
# Traces the ranks whose local rank is PROFRANK and whose global rank is below RANKCUTOFF
# (empty: no cutoff); every other rank runs the command plainly.
# Usage: bash tracer.sh <command> [args...]   (override PROFRANK/RANKCUTOFF via env)
set -euo pipefail
if (( $# == 0 )); then echo "usage: bash tracer.sh <command> [args...]" >&2; exit 2; fi

PROFRANK="${PROFRANK-0}"
RANKCUTOFF="${RANKCUTOFF-12}"
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
exec unitrace --chrome-mpi-logging --chrome-sycl-logging --chrome-device-logging --chrome-ccl-logging --chrome-call-logging --chrome-dnn-logging --chrome-itt-logging --device-timing --host-timing --ccl-summary-report --output-dir-path "$out" --output "${report}.txt" "$@"
