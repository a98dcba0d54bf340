#!/usr/bin/env bash
# Build a minimal Debian base image without a registry: debootstrap into a temp
# rootfs, then `docker import`. Real agents pull the matrix's base from a registry;
# this image stands in for it (matrix key image.local_base) where none is reachable.
#
# Usage: ci/make-base-image.sh [TAG] [SUITE]     (default harness-base:bookworm)
# Env:   HARNESS_DEBIAN_MIRROR overrides the mirror read from the apt sources.
set -euo pipefail

tag="${1:-harness-base:bookworm}"
suite="${2:-bookworm}"
here="$(cd "$(dirname "$0")" && pwd)"

# g++ and the Python headers: torch.compile (inductor) builds C++ kernels at run time,
# on the CPU lanes too.
packages="python3,python3-venv,python3-pip,python3-dev,g++"
if [ "$(docker image inspect --format '{{index .Config.Labels "org.harness.base-packages"}}' \
        "$tag" 2>/dev/null)" = "$packages" ]; then
    echo "make-base-image: $tag exists with $packages; nothing to do"
    exit 0
fi

# shellcheck source=ci/debian-mirror.sh
. "$here/debian-mirror.sh"
mirror="$(debian_mirror)"

command -v debootstrap >/dev/null 2>&1 || {
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q debootstrap
}

rootfs="$(mktemp -d /tmp/harness-rootfs.XXXXXX)"
trap 'rm -rf "$rootfs"' EXIT
echo "make-base-image: debootstrap $suite from $mirror"
debootstrap --variant=minbase --include="$packages" \
    "$suite" "$rootfs" "$mirror" >"$rootfs.log" 2>&1 || {
    tail -n 30 "$rootfs.log" >&2
    exit 3
}
rm -f "$rootfs.log"
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
tar -C "$rootfs" -c . | docker import \
    --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' \
    --change "LABEL org.harness.base-packages=$packages" - "$tag"
echo "make-base-image: imported $tag"
