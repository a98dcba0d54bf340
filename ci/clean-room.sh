#!/usr/bin/env bash
# The README on a machine as users have it: a minimal Debian bookworm container
# (debootstrap minbase with python3 and python3-venv, nothing else), pip reaching the
# public package index with no local configuration (the host's pip config, constraints
# and wheel folders stay out; only the CA trust store goes in, for the TLS proxy), then
# ci/clean-room-inner.sh: `harness doctor` and `harness run` on the bare system (exit 3,
# nothing built), README command 1 verbatim (system packages included), and a wheel (`pip install .`) used
# from outside any checkout.
#
# Usage: ci/clean-room.sh            (needs a Docker engine: ci/bootstrap-docker.sh)
# Env:   HARNESS_CLEANROOM_PIP_CACHE  host folder kept as the container's pip cache
#        between runs (default ~/.cache/harness/cleanroom-pip; "none" for a cold one).
#        It holds only files pip itself downloaded from the public index in an earlier
#        clean-room run: resolution still goes to the index every time.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/.." && pwd)"
tag="harness-cleanroom:bookworm"
packages="python3,python3-venv"
started=$(date +%s)

if [ "$(docker image inspect --format '{{index .Config.Labels "org.harness.base-packages"}}' \
        "$tag" 2>/dev/null)" != "$packages" ]; then
    # shellcheck source=ci/debian-mirror.sh
    . "$here/debian-mirror.sh"
    mirror="$(debian_mirror)"
    rootfs="$(mktemp -d /tmp/harness-cleanroom.XXXXXX)"
    trap 'rm -rf "$rootfs"' EXIT
    echo "clean-room: debootstrap minbase bookworm with $packages"
    debootstrap --variant=minbase --include="$packages" bookworm "$rootfs" "$mirror" \
        >"$rootfs.log" 2>&1 || { tail -n 30 "$rootfs.log" >&2; exit 3; }
    rm -f "$rootfs.log"
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb
    tar -C "$rootfs" -c . | docker import \
        --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' \
        --change "LABEL org.harness.base-packages=$packages" - "$tag" >/dev/null
    rm -rf "$rootfs"
    trap - EXIT
    echo "clean-room: image $tag ready after $(( $(date +%s) - started ))s"
fi

# The checkout as CI has it: tracked files only (no .venv, no reports, no build output).
src="$(mktemp -d /tmp/harness-cleanroom-src.XXXXXX)"
trap 'rm -rf "$src"' EXIT
git -C "$repo" ls-files -z --cached --others --exclude-standard \
    | (cd "$repo" && tar --null -T - -c 2>/dev/null) | tar -C "$src" -x

cache_args=()
pip_cache="${HARNESS_CLEANROOM_PIP_CACHE:-$HOME/.cache/harness/cleanroom-pip}"
if [ "$pip_cache" != "none" ]; then
    mkdir -p "$pip_cache"
    cache_args=(-v "$pip_cache:/root/.cache/pip")
fi
ca=/etc/ssl/certs/ca-certificates.crt
name="harness-cleanroom-$$"
echo "clean-room: running ci/clean-room-inner.sh in $tag (network host, no pip config)"
set +e
docker run --rm --name "$name" --network host \
    -v "$src:/src:ro" -v "$ca:/etc/ssl/certs/ca-certificates.crt:ro" \
    -e SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    -e REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt \
    -e PIP_DISABLE_PIP_VERSION_CHECK=1 -e PIP_ROOT_USER_ACTION=ignore \
    "${cache_args[@]}" -w /root "$tag" bash /src/ci/clean-room-inner.sh
code=$?
set -e
echo "clean-room: exit $code after $(( $(date +%s) - started ))s in all"
exit "$code"
