#!/usr/bin/env bash
# Polaris (ALCF): source env/polaris/setup.sh -- first on a LOGIN node, which builds the venv
# (pip needs PyPI; compute nodes reach it only through ALCF's proxy), then anywhere to use it.
# Loads the pinned conda module (PyTorch with CUDA, mpi4py built for Cray MPICH/PALS) with the
# same lines as hpcprof_kit/systems/polaris.toml's [environment] setup, then a venv named after
# that module (the record's default_venv) with the kit on top (env/common/site_venv.sh) and the
# kernel that Polaris's JupyterHub lists, "Python (hpcprof-kit, Polaris)".
# Override the venv location with HPCPROF_VENV or the workshop file's venv.
# shellcheck source=env/common/site_venv.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common/site_venv.sh"
module use /soft/modulefiles
module load conda/2025-09-25 || { echo "polaris: 'module load conda/2025-09-25' failed; are you on Polaris? ('module avail conda' lists the versions there)" >&2; return 1; }
conda activate || return 1
workshop_venv=$(workshop_value venv)  # the class's venv, when the instructor set one
site_venv polaris "${HPCPROF_VENV:-${workshop_venv:-$HOME/venvs/hpcprof-kit-polaris-conda-2025-09-25}}" "Python (hpcprof-kit, Polaris)" || return 1
echo "polaris: venv $VIRTUAL_ENV active; in JupyterHub pick the kernel 'Python (hpcprof-kit, Polaris)'"
