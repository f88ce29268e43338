#!/usr/bin/env bash
# Make this machine able to run the sandbox: a Docker engine that answers, and the
# tools the offline image build needs. Idempotent and quick when all is there.
# Runs as root on Debian (as on the project's machines and CI); says what to do otherwise.
set -euo pipefail

log() { printf 'setup-engine: %s\n' "$*" >&2; }

missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
if [ "${SELFHEAL_WITH_BROWSER:-0}" = 1 ] && [ ! -x /usr/bin/chromium ]; then missing+=(chromium); fi
# Podman's Docker API (tests/test_engines.py runs the sandbox against it); catatonit is
# the init it gives containers.
if [ "${SELFHEAL_WITH_PODMAN:-0}" = 1 ]; then
  command -v podman >/dev/null 2>&1 || missing+=(podman)
  [ -x /usr/libexec/podman/catatonit ] || missing+=(catatonit)
fi

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    log "missing packages: ${missing[*]}. Run as root, or: sudo apt-get install -y ${missing[*]}"
    exit 1
  fi
  log "installing ${missing[*]} with apt"
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
fi

if docker info >/dev/null 2>&1; then
  log "Docker engine is running"
  exit 0
fi

if [ -n "${DOCKER_HOST:-}" ]; then
  log "DOCKER_HOST=$DOCKER_HOST does not answer; start that engine or unset DOCKER_HOST"
  exit 1
fi
if [ "$(id -u)" != 0 ]; then
  log "no Docker engine answers; start it (sudo systemctl start docker) or run this script as root"
  exit 1
fi

# Debian's policy script keeps apt from starting services, so start the daemon ourselves.
log "starting dockerd in the background (log: /var/log/selfheal-dockerd.log)"
setsid dockerd >/var/log/selfheal-dockerd.log 2>&1 </dev/null &
for _ in $(seq 1 120); do
  if docker info >/dev/null 2>&1; then
    log "Docker engine is running"
    exit 0
  fi
  sleep 0.5
done
log "dockerd did not answer within 60 s; see /var/log/selfheal-dockerd.log"
exit 1
