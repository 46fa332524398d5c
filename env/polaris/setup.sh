#!/usr/bin/env bash
# Polaris (ALCF): source this on a login or compute node:  source env/polaris/setup.sh
# Loads the conda module (PyTorch with CUDA, mpi4py built for Cray MPICH/PALS), then a venv on
# top of it with the kit (env/common/site_venv.sh) and the kernel that Polaris's JupyterHub lists.
# shellcheck source=env/common/site_venv.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common/site_venv.sh"
module use /soft/modulefiles
module load conda || { echo "polaris: 'module load conda' failed; are you on Polaris?" >&2; return 1; }
conda activate
site_venv polaris "${HPCPROF_VENV:-$HOME/venvs/hpcprof-kit-polaris}" "Python (hpcprof-kit, Polaris)" || return 1
echo "polaris: venv $VIRTUAL_ENV active; in JupyterHub pick the kernel 'Python (hpcprof-kit, Polaris)'"
