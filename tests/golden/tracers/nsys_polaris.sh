#!/usr/bin/env bash
# hpcprof-kit tracer wrapper: nsys on polaris
# NVIDIA Nsight Systems: one timeline report per traced rank.
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
out="$run_dir/traces/nsys"
mkdir -p "$out"
# nsys keeps its scratch files in TMPDIR (the default is not writable under mpiexec):
# one folder per rank. But nsys 2022.4 keeps one session registry per node (in
# /dev/shm), locked through $TMPDIR/nvidia: that folder is the node's (nsys's default),
# or ranks that start together lock it apart and can hang ('Agent launcher failed').
nsys_lock="${HPCPROF_NSYS_LOCK_DIR:-${TMPDIR:-/tmp}/nvidia}"
export TMPDIR="$out/tmp/rank$rank"
if ! mkdir -p "$nsys_lock" 2>/dev/null || [[ ! -w "$nsys_lock" ]]; then
    nsys_lock="$out/tmp/nvidia"  # the job's ranks at least share one
fi
mkdir -p "$TMPDIR" "$nsys_lock"
ln -sfn "$nsys_lock" "$TMPDIR/nvidia"
echo "hpcprof-kit: nsys traces rank $rank (local rank $local_rank) into $out" >&2
exec nsys profile -o "$out/${run}_%q{PMI_RANK}" --stats=true --show-output=true "$@"
