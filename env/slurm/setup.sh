#!/usr/bin/env bash
# A generic Slurm cluster: source this after loading your site's PyTorch and MPI modules.
#   module load <pytorch> <mpi>      # site specific
#   source env/slurm/setup.sh
# Without a site PyTorch, build the local recipe instead ('make env'), which pins CPU torch.
kit_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
if ! python3 -c 'import torch' 2>/dev/null; then
  echo "slurm: no torch in this Python; load the site's PyTorch module, or use 'make env' (CPU)" >&2
  return 1
fi
venv=${HPCPROF_VENV:-$HOME/venvs/hpcprof-kit-slurm}
if [ ! -x "$venv/bin/python3" ]; then
  python3 -m venv --system-site-packages "$venv"
  # shellcheck disable=SC1091
  source "$venv/bin/activate"
  bash "$kit_dir/env/common/install_on_site.sh" "$kit_dir" lab
  HPCPROF_SYSTEM=slurm bash "$kit_dir/env/common/register_kernel.sh"
else
  # shellcheck disable=SC1091
  source "$venv/bin/activate"
fi
export HPCPROF_SYSTEM=slurm
export KINETO_LOG_LEVEL=6
echo "slurm: venv $venv active; run 'hpcprof-kit doctor'"
