#!/usr/bin/env bash
# hpcprof-kit tracer wrapper: ncu on polaris
# NVIDIA Nsight Compute: kernel metrics (set NCU_SET, and NCU_KERNEL to pick a kernel).
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
out="$run_dir/traces/ncu"
mkdir -p "$out"
# --set basic|detailed|full|roofline (basic: ncu's default); -k picks kernels by name.
ncu_args=(--set "${NCU_SET:-detailed}")
if [[ -n "${NCU_KERNEL:-}" ]]; then ncu_args+=(-k "$NCU_KERNEL"); fi
if [[ -n "${NCU_LAUNCH_SKIP:-}" ]]; then ncu_args+=(--launch-skip "$NCU_LAUNCH_SKIP"); fi
if [[ -n "${NCU_LAUNCH_COUNT:-}" ]]; then ncu_args+=(--launch-count "$NCU_LAUNCH_COUNT"); fi
echo "hpcprof-kit: ncu traces rank $rank (local rank $local_rank) into $out" >&2
exec ncu "${ncu_args[@]}" -o "$out/${run}_%q{PMI_RANK}" "$@"
