#!/usr/bin/env bash
# Aurora (ALCF): source env/aurora/setup.sh -- first on a LOGIN node, which builds the venv
# (pip needs PyPI; compute nodes reach it only through ALCF's proxy), then anywhere to use it.
# Loads the pinned frameworks module (PyTorch with XPU, oneCCL, mpi4py built for Cray
# MPICH/PALS), the same line as hpcprof_kit/systems/aurora.toml's [environment] setup, then a
# venv named after that module (the record's default_venv) with the kit on top
# (env/common/site_venv.sh) and the Jupyter kernel "Python (hpcprof-kit, Aurora)".
# Override the venv location with HPCPROF_VENV or the workshop file's venv (home is small: a project filesystem is better).
# shellcheck source=env/common/site_venv.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common/site_venv.sh"
module load frameworks/2025.3.1 || { echo "aurora: 'module load frameworks/2025.3.1' failed; are you on Aurora? ('module avail frameworks' lists the versions there)" >&2; return 1; }
workshop_venv=$(workshop_value venv)  # the class's venv, when the instructor set one
site_venv aurora "${HPCPROF_VENV:-${workshop_venv:-$HOME/venvs/hpcprof-kit-aurora-frameworks-2025.3.1}}" "Python (hpcprof-kit, Aurora)" || return 1
export ZE_FLAT_DEVICE_HIERARCHY=${ZE_FLAT_DEVICE_HIERARCHY:-FLAT}
echo "aurora: venv $VIRTUAL_ENV active; run 'hpcprof-kit doctor'"
