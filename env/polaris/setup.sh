#!/usr/bin/env bash
# Polaris (ALCF): source this on a login or compute node:  source env/polaris/setup.sh
# - loads the conda module (PyTorch with CUDA, mpi4py built for Cray MPICH/PALS);
# - creates (once) a venv on top of it with --system-site-packages;
# - installs the kit without replacing the site's torch/mpi4py (env/common/install_on_site.sh);
# - registers the Jupyter kernel "hpcprof-kit" that Polaris's JupyterHub lists.
kit_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
module use /soft/modulefiles
module load conda || { echo "polaris: 'module load conda' failed; are you on Polaris?" >&2; return 1; }
conda activate
venv=${HPCPROF_VENV:-$HOME/venvs/hpcprof-kit-polaris}
if [ ! -x "$venv/bin/python3" ]; then
  python3 -m venv --system-site-packages "$venv"
  # shellcheck disable=SC1091
  source "$venv/bin/activate"
  bash "$kit_dir/env/common/install_on_site.sh" "$kit_dir" lab
  HPCPROF_SYSTEM=polaris bash "$kit_dir/env/common/register_kernel.sh" hpcprof-kit "Python (hpcprof-kit, Polaris)"
else
  # shellcheck disable=SC1091
  source "$venv/bin/activate"
fi
export HPCPROF_SYSTEM=polaris
export KINETO_LOG_LEVEL=6
echo "polaris: venv $venv active; in JupyterHub pick the kernel 'Python (hpcprof-kit, Polaris)'"
