#!/usr/bin/env bash
# A generic Slurm cluster: source this after loading your site's PyTorch and MPI modules.
#   module load <pytorch> <mpi>      # site specific
#   source env/slurm/setup.sh
# Without a site PyTorch, build the local recipe instead ('make env'), which pins CPU torch.
# shellcheck source=env/common/site_venv.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common/site_venv.sh"
if ! python3 -c 'import torch' 2>/dev/null; then
  echo "slurm: no torch in this Python; load the site's PyTorch module, or use 'make env' (CPU)" >&2
  return 1
fi
site_venv slurm "${HPCPROF_VENV:-$HOME/venvs/hpcprof-kit-slurm}" "Python (hpcprof-kit)" || return 1
echo "slurm: venv $VIRTUAL_ENV active; run 'hpcprof-kit doctor'"
