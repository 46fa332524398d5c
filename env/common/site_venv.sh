#!/usr/bin/env bash
# Sourced by env/<system>/setup.sh after the site's modules are loaded:
#   site_venv SYSTEM DEFAULT_VENV "KERNEL DISPLAY NAME"
# Creates (once) a venv with --system-site-packages on top of the site Python, installs the kit
# without replacing the site's torch/mpi4py, registers the Jupyter kernel, then activates it.
site_venv() {
  local system=$1 venv=$2 display=$3
  local kit_dir
  kit_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  if [ ! -x "$venv/bin/python3" ]; then
    python3 -m venv --system-site-packages "$venv" || return 1
    # shellcheck disable=SC1091
    source "$venv/bin/activate"
    bash "$kit_dir/env/common/install_on_site.sh" "$kit_dir" lab || return 1
    HPCPROF_SYSTEM=$system bash "$kit_dir/env/common/register_kernel.sh" hpcprof-kit "$display"
  else
    # shellcheck disable=SC1091
    source "$venv/bin/activate"
  fi
  export HPCPROF_SYSTEM=$system
  export KINETO_LOG_LEVEL=6
}
