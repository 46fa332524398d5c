#!/usr/bin/env bash
# Aurora (ALCF): source this on a login or compute node:  source env/aurora/setup.sh
# Loads the frameworks module (PyTorch with XPU, oneCCL, mpi4py built for Cray MPICH/PALS), then
# a venv on top of it with the kit (env/common/site_venv.sh) and the Jupyter kernel "hpcprof-kit".
# Override the venv location with HPCPROF_VENV (home is small: a project filesystem is better).
# shellcheck source=env/common/site_venv.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common/site_venv.sh"
module load frameworks || { echo "aurora: 'module load frameworks' failed; are you on Aurora?" >&2; return 1; }
site_venv aurora "${HPCPROF_VENV:-$HOME/venvs/hpcprof-kit-aurora}" "Python (hpcprof-kit, Aurora)" || return 1
export ZE_FLAT_DEVICE_HIERARCHY=${ZE_FLAT_DEVICE_HIERARCHY:-FLAT}
echo "aurora: venv $VIRTUAL_ENV active; run 'hpcprof-kit doctor'"
