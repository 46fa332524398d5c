#!/usr/bin/env bash
# Registers the active environment as the Jupyter kernel "hpcprof-kit" (per user).
# KINETO_LOG_LEVEL=6 keeps Kineto's stderr lines out of notebook outputs. On Aurora and Polaris
# the kernel also gets ALCF's proxy, as ALCF's JupyterHub page shows (ipykernel install --env
# http_proxy ... --env https_proxy ...): its compute nodes reach the internet only through it.
# Usage: bash env/common/register_kernel.sh [NAME] [DISPLAY NAME]
set -euo pipefail
# shellcheck source=env/common/alcf_proxy.sh
source "$(dirname "${BASH_SOURCE[0]}")/alcf_proxy.sh"
name=${1:-hpcprof-kit}
display=${2:-Python (hpcprof-kit)}
system=${HPCPROF_SYSTEM:-local}
envs=(--env KINETO_LOG_LEVEL 6 --env HPCPROF_SYSTEM "$system")
case $system in
  aurora | polaris)
    envs+=(--env http_proxy "$ALCF_PROXY" --env https_proxy "$ALCF_PROXY"
      --env HTTP_PROXY "$ALCF_PROXY" --env HTTPS_PROXY "$ALCF_PROXY" --env no_proxy "$ALCF_NO_PROXY") ;;
esac
python3 -m ipykernel install --user --name "$name" --display-name "$display" "${envs[@]}"
echo "kernel '$name' registered for $(command -v python3)"
