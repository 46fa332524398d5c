#!/usr/bin/env bash
# Aurora has no JupyterHub: run JupyterLab on a compute node and reach it through an SSH tunnel
# with the login node as jump host (ALCF's route: docs.alcf.anl.gov aurora/data-science/jupyter).
#   1. qsub -I -l select=1 -l walltime=01:00:00 -l filesystems=home:flare -A <project> -q debug
#   2. on the compute node:  source env/aurora/setup.sh && bash env/aurora/jupyter_on_compute_node.sh
#   3. on your laptop: run the ssh command this script prints, then open the printed URL.
# JupyterLab listens on 127.0.0.1 only: the tunnel ends on the node itself, so no one else on
# the network can reach it.
# Usage: bash env/aurora/jupyter_on_compute_node.sh [PORT]
set -euo pipefail
if [[ $(hostname) =~ aurora-uan ]]; then
  echo "jupyter_on_compute_node: $(hostname) is a login node; start an interactive job (qsub -I ...) and run this on its compute node" >&2
  exit 1
fi
port=${1:-$((8800 + RANDOM % 100))}
node=$(hostname -s)
cat <<MSG
On your laptop, in a new terminal:
  ssh -L ${port}:127.0.0.1:${port} -J ${USER}@aurora.alcf.anl.gov ${USER}@${node}
(this needs your laptop's public key in ~/.ssh/authorized_keys on Aurora, and ~/.ssh there with mode 700: chmod 700 ~/.ssh)
then open the http://127.0.0.1:${port}/lab?token=... URL that JupyterLab prints below.
MSG
exec jupyter lab --no-browser --ip=127.0.0.1 --port="$port"
