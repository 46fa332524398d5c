#!/bin/bash -l
#PBS -N hpcprof-train
#PBS -A YOUR_PROJECT
#PBS -q debug
#PBS -l select=1
#PBS -l place=scatter
#PBS -l walltime=00:10:00
#PBS -l filesystems=home:flare
#PBS -k doe
# train on aurora: DDP training of a small Transformer
# Ready script jobs/aurora/train.sh, from `hpcprof-kit render --all jobs/` (no spec.json goes
# with it): for other choices, render your own with `hpcprof-kit render` or JobSpec(...).render().
set -eo pipefail

# The run directory holds this script, its outputs, traces/, tables/ and timings/.
export HPCPROF_RUN_DIR="${HPCPROF_RUN_DIR:-${PBS_O_WORKDIR:-$PWD}}"
export HPCPROF_SYSTEM=aurora
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
module load frameworks/2025.3.1

# The Python environment this job was rendered from (the kit and its packages): a batch job
# starts from a clean login environment, so it is named here and activated after the modules.
HPCPROF_VENV="$HOME"/venvs/hpcprof-kit-aurora-frameworks-2025.3.1
if [[ ! -f "$HPCPROF_VENV/bin/activate" ]]; then
    echo "hpcprof-kit: no Python environment at $HPCPROF_VENV (bin/activate is missing); build it on a login node with env/aurora/setup.sh, or name yours with JobSpec(venv=...)" >&2
    exit 1
fi
# shellcheck disable=SC1091  # the environment exists only on the site
source "$HPCPROF_VENV/bin/activate"

# Environment for every rank
export FI_MR_CACHE_MONITOR=userfaultfd
export CCL_PROCESS_LAUNCHER=pmix
export CCL_ATL_TRANSPORT=mpi
export CCL_KVS_MODE=mpi
export TMPDIR=/tmp
export ZE_FLAT_DEVICE_HIERARCHY=FLAT
export CCL_WORKER_AFFINITY=42,43,44,45,46,47,94,95,96,97,98,99
export OMP_NUM_THREADS=4

# 1 node(s) x 12 rank(s) per node = 12 rank(s)
mpiexec -n 12 -ppn 12 --pmi=pmix --cpu-bind list:4-7:8-11:12-15:16-19:20-23:24-27:56-59:60-63:64-67:68-71:72-75:76-79 -l --line-buffer --hostfile "$PBS_NODEFILE" \
    python3 -m hpcprof_kit.apps.train
