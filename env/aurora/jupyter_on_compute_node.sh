#!/usr/bin/env bash
# Aurora has no JupyterHub: run JupyterLab on the compute node of an interactive job and reach it
# through an SSH tunnel via the login node.
#   1. qsub -I -l select=1 -l walltime=01:00:00 -l filesystems=home:flare -A <project> -q debug
#   2. on the compute node:  source env/aurora/setup.sh && bash env/aurora/jupyter_on_compute_node.sh
#   3. on your laptop: run the ssh command this script prints, then open the printed URL.
set -euo pipefail
port=${1:-$((8800 + RANDOM % 100))}
node=$(hostname -s)
cat <<MSG
On your laptop, in a new terminal:
  ssh -N -L ${port}:${node}:${port} ${USER}@aurora.alcf.anl.gov
then open the http://localhost:${port}/lab?token=... URL that JupyterLab prints below.
MSG
exec jupyter lab --no-browser --ip="$(hostname -f)" --port="$port"
