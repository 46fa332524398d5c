#!/usr/bin/env bash
# Aurora (ALCF): source this on a login or compute node:  source env/aurora/setup.sh
# - loads the frameworks module (PyTorch with XPU, oneCCL, mpi4py built for Cray MPICH/PALS);
# - creates (once) a venv on top of it with --system-site-packages;
# - installs the kit without replacing the site's torch/mpi4py (env/common/install_on_site.sh);
# - registers the Jupyter kernel "hpcprof-kit".
# Override the venv location with HPCPROF_VENV (home is small: a project filesystem is better).
kit_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
module load frameworks || { echo "aurora: 'module load frameworks' failed; are you on Aurora?" >&2; return 1; }
venv=${HPCPROF_VENV:-$HOME/venvs/hpcprof-kit-aurora}
if [ ! -x "$venv/bin/python3" ]; then
  python3 -m venv --system-site-packages "$venv"
  # shellcheck disable=SC1091
  source "$venv/bin/activate"
  bash "$kit_dir/env/common/install_on_site.sh" "$kit_dir" lab
  HPCPROF_SYSTEM=aurora bash "$kit_dir/env/common/register_kernel.sh" hpcprof-kit "Python (hpcprof-kit, Aurora)"
else
  # shellcheck disable=SC1091
  source "$venv/bin/activate"
fi
export HPCPROF_SYSTEM=aurora
export KINETO_LOG_LEVEL=6
export ZE_FLAT_DEVICE_HIERARCHY=${ZE_FLAT_DEVICE_HIERARCHY:-FLAT}
echo "aurora: venv $venv active; run 'hpcprof-kit doctor'"
