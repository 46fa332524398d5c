#!/bin/bash
#SBATCH -J hpcprof-train-profile
#SBATCH -N 1
#SBATCH --ntasks-per-node=2
#SBATCH -t 00:10:00
#SBATCH -o stdout
#SBATCH -e stderr
# train on slurm: DDP training of a small Transformer
# Ready script jobs/slurm/train-profile.sh, from `hpcprof-kit render --all jobs/` (no spec.json goes
# with it): for other choices, render your own with `hpcprof-kit render` or JobSpec(...).render().
set -eo pipefail

# The run directory holds this script, its outputs, traces/, tables/ and timings/.
export HPCPROF_RUN_DIR="${HPCPROF_RUN_DIR:-${SLURM_SUBMIT_DIR:-$PWD}}"
export HPCPROF_SYSTEM=slurm
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

# 1 node(s) x 2 rank(s) per node = 2 rank(s)
srun -N 1 --ntasks-per-node 2 --mpi=pmi2 \
    python3 -m hpcprof_kit.apps.train --profile
