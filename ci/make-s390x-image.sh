#!/usr/bin/env bash
# Build the s390x base image on an x86 host: register qemu-user through binfmt_misc,
# debootstrap a big-endian s390x Debian with Debian's own torch (PyPI has no s390x
# wheels), and `docker import` it. Debian forky: python3-torch 2.14 (custom ops,
# torch.compile), with g++ and the Python headers for inductor's C++ kernels. About
# 10-15 minutes under qemu and 2.5 GB; skipped when the image exists with the same
# suite and package list (a label), so keep the engine's data root between runs.
#
# Run the image WITHOUT --platform: dockerd 20.10 then looks for a registry, while
# binfmt runs the s390x binaries of an imported image on its own.
#
# Usage: ci/make-s390x-image.sh [TAG] [SUITE]   (default harness-base-s390x:forky forky;
#        e.g. harness-base-s390x:trixie trixie)
# Env:   HARNESS_DEBIAN_MIRROR overrides the mirror read from the apt sources.
set -euo pipefail

# forky (Debian testing): python3-torch 2.14 on s390x. trixie (torch 2.6) is the stable
# choice where the mirror carries it; on the mirror here, trixie's s390x point-release
# packages (libc6, zlib1g, apt, ...) answer 404 while their amd64 builds are there.
tag="${1:-harness-base-s390x:forky}"
suite="${2:-forky}"
here="$(cd "$(dirname "$0")" && pwd)"

# python3-tiktoken (Debian's build: PyPI has no s390x wheel) reads the primed
# tokenizer cache. g++, python3-dev and libtorch-dev (torch's headers and the
# libtorch.so link names): inductor compiles and links C++ kernels at run time.
packages="python3,python3-torch,python3-numpy,python3-pytest,python3-yaml,python3-tiktoken"
packages="$packages,python3-dev,libtorch-dev,g++"
if [ "$(docker image inspect --format '{{index .Config.Labels "org.harness.base-packages"}}' \
        "$tag" 2>/dev/null)" = "$suite:$packages" ]; then
    echo "make-s390x-image: $tag exists with $packages; nothing to do"
    exit 0
fi

# shellcheck source=ci/debian-mirror.sh
. "$here/debian-mirror.sh"
mirror="$(debian_mirror)"

if ! command -v qemu-s390x-static >/dev/null 2>&1 || ! command -v update-binfmts >/dev/null 2>&1 \
    || ! command -v debootstrap >/dev/null 2>&1; then
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q qemu-user-static binfmt-support debootstrap
fi

if [ ! -e /proc/sys/fs/binfmt_misc/register ]; then
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
fi
update-binfmts --enable qemu-s390x
# The F (fix binary) flag lets containers use the host's interpreter without it
# being inside their rootfs.
if ! grep -q '^flags:.*F' /proc/sys/fs/binfmt_misc/qemu-s390x; then
    echo "make-s390x-image: qemu-s390x is registered without the F flag" >&2
    exit 3
fi

rootfs="$(mktemp -d /tmp/harness-rootfs-s390x.XXXXXX)"
trap 'rm -rf "$rootfs" "$rootfs.log"' EXIT
echo "make-s390x-image: debootstrap --arch=s390x $suite from $mirror (several minutes)"
start=$SECONDS
# An older debootstrap has no script for a newer suite: they all bootstrap like sid.
script=/usr/share/debootstrap/scripts/$suite
[ -e "$script" ] || script=/usr/share/debootstrap/scripts/sid
debootstrap --arch=s390x --variant=minbase --include="$packages" \
    "$suite" "$rootfs" "$mirror" "$script" >"$rootfs.log" 2>&1 || {
    tail -n 30 "$rootfs.log" >&2
    exit 3
}
echo "make-s390x-image: debootstrap took $((SECONDS - start)) s"
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
tar -C "$rootfs" -c . | docker import \
    --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' \
    --change "LABEL org.harness.base-packages=$suite:$packages" - "$tag"
docker run --rm --network none "$tag" python3 -c \
    "import sys, platform, torch; assert platform.machine() == 's390x', platform.machine(); \
print(sys.byteorder, 'torch', torch.__version__)"
echo "make-s390x-image: imported $tag"
