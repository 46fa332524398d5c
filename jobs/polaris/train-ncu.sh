#!/bin/bash -l
#PBS -N hpcprof-train-ncu
#PBS -A YOUR_PROJECT
#PBS -q debug
#PBS -l select=1:system=polaris
#PBS -l place=scatter
#PBS -l walltime=00:10:00
#PBS -l filesystems=home:eagle
#PBS -k doe
# train on polaris: DDP training of a small Transformer
# Ready script jobs/polaris/train-ncu.sh, from `hpcprof-kit render --all jobs/` (no spec.json goes
# with it): for other choices, render your own with `hpcprof-kit render` or JobSpec(...).render().
set -eo pipefail

# The run directory holds this script, its outputs, traces/, tables/ and timings/.
export HPCPROF_RUN_DIR="${HPCPROF_RUN_DIR:-${PBS_O_WORKDIR:-$PWD}}"
export HPCPROF_SYSTEM=polaris
cd "$HPCPROF_RUN_DIR"
mkdir -p traces tables timings
# The job records its own end (exit code, the signal that ended it or null, the time) in the
# run directory, whatever started it; a cancel or the walltime's SIGTERM is named as a signal.
hpcprof_signal=""
hpcprof_job_end() {
    local rc=$1 sig=null now
    trap '' TERM INT HUP  # a second signal (a launcher forwarding one) must not cut it short
    # the trap's signal; else the one the exit code names (the scheduler's SIGTERM can reach
    # the command before this shell, which then ends on the command's 128+N before its trap)
    if [[ -n "$hpcprof_signal" ]]; then
        sig=$hpcprof_signal
    elif ((rc > 128 && rc <= 192)); then
        sig=$((rc - 128))
    fi
    # bash builtins only: a scheduler's SIGTERM reaches every process of the job, and a `date`
    # or `mv` started here could die of it before the record is written
    printf -v now '%(%Y-%m-%dT%H:%M:%S%z)T' -1
    printf '{"exit_code": %d, "signal": %s, "ended_at": "%s"}\n' "$rc" "$sig" \
        "${now:0:22}:${now:22}" >job_end.json
}
# A signal's trap writes the record before it exits: it can interrupt the EXIT trap before
# that wrote a word (the command ended on the scheduler's 128+N first), and an exit from
# inside the EXIT trap does not run it again.
hpcprof_on_signal() {
    hpcprof_signal=$1
    hpcprof_job_end $((128 + $1))
    exit $((128 + $1))
}
trap 'hpcprof_job_end $?' EXIT
trap 'hpcprof_on_signal 15' TERM
trap 'hpcprof_on_signal 2' INT
trap 'hpcprof_on_signal 1' HUP

# Site environment
module use /soft/modulefiles
module load conda/2025-09-25
conda activate

# Vendor tracer (ncu): its site module, checked before any rank starts
module load nvidia
command -v ncu >/dev/null || { echo "hpcprof-kit: ncu is not on PATH after 'module load nvidia'; see 'module avail nvidia' (the module may have moved) and update modules in polaris.toml" >&2; exit 1; }

# The Python environment this job was rendered from (the kit and its packages): a batch job
# starts from a clean login environment, so it is named here and activated after the modules.
HPCPROF_VENV="$HOME"/venvs/hpcprof-kit-polaris-conda-2025-09-25
if [[ ! -f "$HPCPROF_VENV/bin/activate" ]]; then
    echo "hpcprof-kit: no Python environment at $HPCPROF_VENV (bin/activate is missing); build it on a login node with env/polaris/setup.sh, or name yours with JobSpec(venv=...)" >&2
    exit 1
fi
# shellcheck disable=SC1091  # the environment exists only on the site
source "$HPCPROF_VENV/bin/activate"

# Environment for every rank
export LD_LIBRARY_PATH=/soft/libraries/aws-ofi-nccl/v1.9.1-aws/lib:/soft/libraries/hwloc/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export NCCL_NET_GDR_LEVEL=PHB
export NCCL_CROSS_NIC=1
export NCCL_COLLNET_ENABLE=1
export NCCL_NET='AWS Libfabric'
export FI_CXI_DISABLE_HOST_REGISTER=1
export FI_MR_CACHE_MONITOR=userfaultfd
export FI_CXI_DEFAULT_CQ_SIZE=131072
export OMP_NUM_THREADS=8

# Vendor tracer wrapper (ncu): traces local rank 0 of every node (rank 0); runs the others plainly.
cat > "$HPCPROF_RUN_DIR/tracer.sh" <<'HPCPROF_TRACER_EOF'
#!/usr/bin/env bash
# hpcprof-kit tracer wrapper: ncu on polaris
# NVIDIA Nsight Compute: kernel metrics (set NCU_SET, and NCU_KERNEL to pick a kernel).
# Traces the ranks whose local rank is PROFRANK and whose global rank is below RANKCUTOFF
# (empty: no cutoff); every other rank runs the command plainly.
# This job (4 ranks, 4 per node) traces local rank 0 of every node (rank 0).
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
out="$run_dir/traces/ncu"
mkdir -p "$out"
# --set basic|detailed|full|roofline (basic: ncu's default); -k picks kernels by name.
ncu_args=(--set "${NCU_SET:-detailed}")
if [[ -n "${NCU_KERNEL:-}" ]]; then ncu_args+=(-k "$NCU_KERNEL"); fi
if [[ -n "${NCU_LAUNCH_SKIP:-}" ]]; then ncu_args+=(--launch-skip "$NCU_LAUNCH_SKIP"); fi
if [[ -n "${NCU_LAUNCH_COUNT:-}" ]]; then ncu_args+=(--launch-count "$NCU_LAUNCH_COUNT"); fi
echo "hpcprof-kit: ncu traces rank $rank (local rank $local_rank) into $out" >&2
exec ncu "${ncu_args[@]}" -o "$out/${run}_%q{PMI_RANK}" "$@"
HPCPROF_TRACER_EOF

# 1 node(s) x 4 rank(s) per node = 4 rank(s)
mpiexec -n 4 -ppn 4 --cpu-bind list:24-31:16-23:8-15:0-7 -l --line-buffer --hostfile "$PBS_NODEFILE" \
    bash "$HPCPROF_RUN_DIR/tracer.sh" python3 -m hpcprof_kit.apps.train
