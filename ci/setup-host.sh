#!/usr/bin/env bash
# Everything a fresh Debian host needs to run the harness's whole test suite:
# Debian packages (Docker engine, debootstrap, qemu for s390x, Chromium for the report
# test), a running Docker engine, and the local base images that stand in for registry
# images. Idempotent; each step skips what is already there.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
command -v qemu-s390x-static >/dev/null 2>&1 || need+=(qemu-user-static binfmt-support)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if [ "${#need[@]}" -gt 0 ]; then
    echo "setup-host: installing ${need[*]}"
    as_root apt-get update -q
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}"
fi

"$here/bootstrap-docker.sh"
"$here/make-base-image.sh"
if [ "${HARNESS_SKIP_S390X:-0}" != "1" ]; then
    "$here/make-s390x-image.sh"
fi
