#!/usr/bin/env bash
# Registers the active environment as the Jupyter kernel "hpcprof-kit" (per user).
# KINETO_LOG_LEVEL=6 keeps Kineto's stderr lines out of notebook outputs.
# Usage: bash env/common/register_kernel.sh [NAME] [DISPLAY NAME]
set -euo pipefail
name=${1:-hpcprof-kit}
display=${2:-Python (hpcprof-kit)}
python3 -m ipykernel install --user --name "$name" --display-name "$display" \
  --env KINETO_LOG_LEVEL 6 --env HPCPROF_SYSTEM "${HPCPROF_SYSTEM:-local}"
echo "kernel '$name' registered for $(command -v python3)"
