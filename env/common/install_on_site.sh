#!/usr/bin/env bash
# Installs the kit into the active virtual environment on top of a site Python (Aurora, Polaris,
# a Slurm cluster) WITHOUT replacing the site's torch, mpi4py, numpy or IPEX: their installed
# versions become pip constraints, and the 'local' extra (CPU torch, the mpich wheel) is never used.
# Usage: bash env/common/install_on_site.sh [KIT_DIR] [EXTRAS]   (EXTRAS default: lab)
set -euo pipefail
kit_dir=${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
extras=${2:-lab}
[ -n "${VIRTUAL_ENV:-}" ] || { echo "install_on_site: activate the site venv first (see env/<system>/setup.sh)" >&2; exit 1; }

constraints=$(mktemp)
trap 'rm -f "$constraints"' EXIT
# Pin every site package that must not move (only those present).
python3 - "$constraints" <<'PY'
import importlib.metadata as md, sys
keep = ["torch", "mpi4py", "numpy", "intel-extension-for-pytorch", "oneccl-bind-pt",
        "torchvision", "torchaudio", "triton", "pytorch-triton-xpu"]
with open(sys.argv[1], "w") as out:
    for name in keep:
        try:
            out.write(f"{name}=={md.version(name)}\n")
        except md.PackageNotFoundError:
            pass
PY
echo "install_on_site: keeping the site's packages:" >&2
sed 's/^/  /' "$constraints" >&2
python3 -m pip install --constraint "$constraints" -e "${kit_dir}[${extras}]"
python3 - <<'PY'
import torch
print(f"install_on_site: torch {torch.__version__} (site build) still in place")
PY
