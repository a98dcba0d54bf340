#!/usr/bin/env bash
# Start a Docker engine on a host that has none (CI agents, fresh dev machines).
# Idempotent: does nothing when an engine already answers.
#
# Hosts without a bridge network or iptables (containers, some CI sandboxes) need
# vfs storage and no bridge; the harness runs containers with --network none anyway.
#
# Env: HARNESS_DOCKER_ROOT (data root, default /var/lib/harness-docker),
#      HARNESS_DOCKER_LOG  (daemon log, default <data root>.log),
#      HARNESS_DOCKER_WAIT (seconds to wait for the daemon, default 60).
set -euo pipefail

data_root="${HARNESS_DOCKER_ROOT:-/var/lib/harness-docker}"
log="${HARNESS_DOCKER_LOG:-${data_root}.log}"
wait_s="${HARNESS_DOCKER_WAIT:-60}"

if docker version >/dev/null 2>&1; then
    echo "bootstrap-docker: an engine already answers; nothing to do"
    exit 0
fi

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

if ! command -v dockerd >/dev/null 2>&1; then
    echo "bootstrap-docker: installing docker.io"
    as_root apt-get update -q
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io
fi

as_root mkdir -p "$data_root"
echo "bootstrap-docker: starting dockerd (data root $data_root, log $log)"
# setsid: the daemon must outlive this script and the shell that ran it.
as_root setsid dockerd --data-root "$data_root" --storage-driver=vfs \
    --iptables=false --bridge=none --ip-masq=false >"$log" 2>&1 < /dev/null &

for _ in $(seq 1 "$wait_s"); do
    if docker version >/dev/null 2>&1; then
        echo "bootstrap-docker: engine up ($(docker version --format '{{.Server.Version}}'))"
        exit 0
    fi
    sleep 1
done
echo "bootstrap-docker: dockerd did not answer within ${wait_s}s; last log lines:" >&2
tail -n 20 "$log" >&2 || true
exit 3
