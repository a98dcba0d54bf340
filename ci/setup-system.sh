#!/usr/bin/env bash
# The system packages the harness needs on a Debian / Ubuntu host: python3-venv (its
# environments), python3-dev and g++ (torch.compile's inductor builds C++ against the
# Python headers). As root, or through sudo; installs only what is missing (README
# command 1 runs it first).
set -euo pipefail

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

need=()
python3 -c 'import ensurepip, venv' >/dev/null 2>&1 || need+=(python3-venv)
[ -f "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" ] \
    || need+=(python3-dev)
command -v g++ >/dev/null 2>&1 || need+=(g++)
if [ "${#need[@]}" -gt 0 ]; then
    echo "setup-system: installing ${need[*]}"
    as_root apt-get update -q
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"
fi
