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
# Podman's Docker API (tests/engines/test_engines.py runs the sandbox against it); catatonit is
# the init it gives containers.
if [ "${SELFHEAL_WITH_PODMAN:-0}" = 1 ]; then
  command -v podman >/dev/null 2>&1 || missing+=(podman)
  [ -x /usr/libexec/podman/catatonit ] || missing+=(catatonit)
fi

# The class service's tests (tests/hub/test_service_hub.py) start a real JupyterHub: its
# proxy comes from npm (node from apt), and the students' venv from Debian's python3.
if [ "${SELFHEAL_WITH_HUB:-0}" = 1 ]; then
  command -v npm >/dev/null 2>&1 || missing+=(npm)
  [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import venv, ensurepip' 2>/dev/null || missing+=(python3-venv)
fi

# The MCP tests (tests/sandbox/test_mcp_inspector.py) drive `selfheal mcp` with the MCP
# Inspector's CLI, a client nobody here wrote: npm, into its own folder.
INSPECTOR_DIR=${SELFHEAL_MCP_INSPECTOR_DIR:-/opt/selfheal-test/mcp-inspector}
if [ "${SELFHEAL_WITH_MCP:-0}" = 1 ]; then
  command -v npm >/dev/null 2>&1 || missing+=(npm)
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

if [ "${SELFHEAL_WITH_HUB:-0}" = 1 ] && ! command -v configurable-http-proxy >/dev/null 2>&1; then
  log "installing configurable-http-proxy with npm"
  npm install -g --silent configurable-http-proxy@5 >/dev/null
fi

if [ "${SELFHEAL_WITH_MCP:-0}" = 1 ] && [ ! -x "$INSPECTOR_DIR/node_modules/.bin/mcp-inspector" ]; then
  log "installing the MCP Inspector with npm into $INSPECTOR_DIR"
  mkdir -p "$INSPECTOR_DIR"
  npm install --silent --no-audit --no-fund --prefix "$INSPECTOR_DIR" @modelcontextprotocol/inspector@2.12.0 >/dev/null
fi

# gVisor, the optional stronger runtime (SelfHeal.runtime = "runsc"): Debian's runsc,
# registered with the local engine with --network=none (gVisor refuses to run in the
# root network namespace otherwise) and --host-uds=open (the runner connects to its
# control socket, a host unix socket in its read-only bind mount, unlinked once
# connected; gVisor refuses that connect otherwise). Optional: if it cannot be had,
# say so and go on. SELFHEAL_WITH_RUNSC=0 skips it.
DAEMON_JSON=/etc/docker/daemon.json
runsc_registered() {
  docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'
}
register_runsc() {  # merge into daemon.json; prints "changed" when it wrote the file
  python3 - "$DAEMON_JSON" <<'PY'
import json, os, sys
path = sys.argv[1]
wanted = {"path": "/usr/bin/runsc", "runtimeArgs": ["--network=none", "--host-uds=open"]}
try:
    with open(path) as f:
        config = json.load(f)
except FileNotFoundError:
    config = {}
except ValueError as exc:
    sys.exit(f"{path} is not valid JSON ({exc}); fix it, then run this script again")
if not isinstance(config, dict):
    sys.exit(f"{path} is not a JSON object; fix it, then run this script again")
runtimes = config.setdefault("runtimes", {})
if runtimes.get("runsc") != wanted:
    runtimes["runsc"] = wanted
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    os.replace(path + ".tmp", path)
    print("changed")
PY
}
want_runsc=0
reload_engine=0
if [ "${SELFHEAL_WITH_RUNSC:-1}" != 0 ] && [ -z "${DOCKER_HOST:-}" ] && [ "$(id -u)" = 0 ]; then
  want_runsc=1
  if [ ! -x /usr/bin/runsc ]; then
    log "installing runsc (gVisor) with apt"
    apt-get update -q >/dev/null || true
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q runsc >/dev/null; then
      log "runsc could not be installed; SelfHeal.runtime = 'runsc' will not work here"
      want_runsc=0
    fi
  fi
  if [ "$want_runsc" = 1 ] && [ "$(register_runsc)" = changed ]; then
    log "registered runsc in $DAEMON_JSON"
    reload_engine=1
  fi
fi

if docker info >/dev/null 2>&1; then
  log "Docker engine is running"
  if [ "$want_runsc" = 1 ] && { [ "$reload_engine" = 1 ] || ! runsc_registered; }; then
    # The engine reads its runtimes again on SIGHUP: no restart, running containers stay.
    pid=$(cat /var/run/docker.pid 2>/dev/null || true)
    if [ -n "$pid" ] && kill -HUP "$pid" 2>/dev/null; then
      for _ in $(seq 1 50); do
        docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q 'host-uds' && break
        sleep 0.1
      done
    fi
    if runsc_registered; then
      log "the engine now offers the runsc runtime"
    else
      log "the running engine did not take runsc up (reload it: kill -HUP <dockerd pid>)"
    fi
  fi
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
