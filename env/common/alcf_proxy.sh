#!/usr/bin/env bash
# ALCF's web proxy. Compute nodes of Aurora and Polaris reach the internet only through it;
# login nodes need none (on Aurora's login nodes it does not even work). Values as documented:
# docs.alcf.anl.gov aurora/getting-started-on-aurora ("Proxy"), polaris/getting-started ("Proxy").
# Sourced by site_venv.sh (a venv built inside a PBS job) and register_kernel.sh (the kernel).
ALCF_PROXY="http://proxy.alcf.anl.gov:3128"
ALCF_NO_PROXY="admin,polaris-adminvm-01,localhost,*.cm.polaris.alcf.anl.gov,polaris-*,*.polaris.alcf.anl.gov,*.alcf.anl.gov"

# Export the proxy variables pip and Jupyter read (both spellings: tools differ in which they use).
alcf_proxy_export() {
  export http_proxy=$ALCF_PROXY https_proxy=$ALCF_PROXY
  export HTTP_PROXY=$ALCF_PROXY HTTPS_PROXY=$ALCF_PROXY
  export no_proxy=$ALCF_NO_PROXY
}
