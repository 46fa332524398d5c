#!/usr/bin/env bash
# Sourced by env/<system>/setup.sh after the site's modules are loaded:
#   site_venv SYSTEM DEFAULT_VENV "KERNEL DISPLAY NAME"
# Creates (once) a venv with --system-site-packages on top of the site Python, installs the kit
# without replacing the site's torch/mpi4py, registers the Jupyter kernel, then activates it.
# The venv remembers the site module it was built on ($venv/hpcprof-site-module): its packages
# were resolved against that module's torch, so a venv used under another module is named.
# shellcheck source=env/common/alcf_proxy.sh
source "$(dirname "${BASH_SOURCE[0]}")/alcf_proxy.sh"

# A value of the class's workshop.toml ($HPCPROF_WORKSHOP, else the checkout's root), or ''.
# Only simple 'key = "value"' lines are read; hpcprof-kit workshop init writes them so.
workshop_value() {
  local key=$1 file=${HPCPROF_WORKSHOP:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/workshop.toml}
  [ "$file" != off ] && [ -f "$file" ] || return 0
  sed -n "s/^$key *= *\"\(.*\)\"\$/\1/p" "$file" | head -n 1
}

# The site Python module loaded now (frameworks/... on Aurora, conda/... on Polaris), or ''.
site_module() {
  local mods m
  IFS=: read -ra mods <<<"${LOADEDMODULES:-}"
  for m in "${mods[@]}"; do
    case $m in frameworks/* | conda/*) echo "$m"; return 0 ;; esac
  done
}

# Install the kit into the active venv. Inside a PBS job on an ALCF system pip goes through
# ALCF's proxy (compute nodes have no other way out); the proxy is set for this build only.
site_install() {
  local system=$1 kit_dir=$2
  if [ -n "${PBS_JOBID:-}" ] && [[ $system == aurora || $system == polaris ]]; then
    echo "$system: building the venv inside PBS job $PBS_JOBID: compute nodes reach PyPI only through ALCF's proxy, so pip uses $ALCF_PROXY (a login node needs none: build there when you can)"
    (alcf_proxy_export && bash "$kit_dir/env/common/install_on_site.sh" "$kit_dir" lab)
  else
    bash "$kit_dir/env/common/install_on_site.sh" "$kit_dir" lab
  fi
}

site_venv() {
  local system=$1 venv=$2 display=$3
  local kit_dir module built
  kit_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  module=$(site_module)
  if [ ! -x "$venv/bin/python3" ]; then
    python3 -m venv --system-site-packages "$venv" || return 1
    [ -z "$module" ] || echo "$module" >"$venv/hpcprof-site-module"
    # shellcheck disable=SC1091
    source "$venv/bin/activate"
    if ! site_install "$system" "$kit_dir"; then
      echo "$system: installing the kit into $venv failed (see above); remove the half-built venv (rm -rf $venv) and source this again" >&2
      return 1
    fi
    HPCPROF_SYSTEM=$system bash "$kit_dir/env/common/register_kernel.sh" hpcprof-kit "$display"
  else
    built=""
    [ ! -f "$venv/hpcprof-site-module" ] || built=$(<"$venv/hpcprof-site-module")
    if [ -n "$built" ] && [ -n "$module" ] && [ "$built" != "$module" ]; then
      echo "$system: venv $venv was built on $built but $module is loaded; rebuild it (rm -rf $venv, then source this again) or 'module load $built'" >&2
    fi
    # shellcheck disable=SC1091
    source "$venv/bin/activate"
  fi
  export HPCPROF_SYSTEM=$system
  export KINETO_LOG_LEVEL=6
}
