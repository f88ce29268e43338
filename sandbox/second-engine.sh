#!/usr/bin/env bash
# A second container engine that does NOT share this machine's files: it runs in its own
# mount namespace with a private tmpfs on /dev/shm and /tmp, and listens on TCP. To the
# sandbox it looks like a remote engine (the client's /dev/shm directories do not exist
# there), which is what the tests and bench/sandbox.py need. As root.
#
#   sandbox/second-engine.sh start docker [PORT]   # dockerd, default port 2376
#   sandbox/second-engine.sh start podman [PORT]   # podman system service, default port 2377
#   sandbox/second-engine.sh stop docker|podman [PORT]
#   sandbox/second-engine.sh status docker|podman [PORT]
#
# `start` prints `DOCKER_HOST=tcp://127.0.0.1:PORT` on stdout once the engine answers.
# `stop` removes every container of that engine, then stops it (by its recorded pid).
# Images stay in SELFHEAL_ENGINE_ROOT (default /var/lib/selfheal-engines/KIND-PORT), so a
# second run does not rebuild the sandbox image there.
set -euo pipefail

log() { printf 'second-engine: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

action=${1:-}
kind=${2:-}
case "$kind" in
  docker) port=${3:-2376} ;;
  podman) port=${3:-2377} ;;
  *) die "usage: $0 start|stop|status docker|podman [PORT]" ;;
esac
[ "$(id -u)" = 0 ] || die "needs root (it starts an engine in its own mount namespace)"

root=${SELFHEAL_ENGINE_ROOT:-/var/lib/selfheal-engines/$kind-$port}
run=/run/selfheal-$kind-$port  # short: containerd's socket path must stay under 108 bytes
pidfile=$run/engine.pid
logfile=$root/engine.log
host=tcp://127.0.0.1:$port

alive() { [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }

answers() {
  # The engine's /_ping over plain HTTP (both engines serve the Docker API there).
  python3 - "$port" <<'EOF' 2>/dev/null
import http.client, sys
c = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]), timeout=2)
c.request("GET", "/_ping")
sys.exit(0 if c.getresponse().status == 200 else 1)
EOF
}

start() {
  if alive && answers; then
    log "$kind already answers at $host (pid $(cat "$pidfile"))"
    echo "DOCKER_HOST=$host"
    return
  fi
  mkdir -p "$root" "$run"
  local engine
  case "$kind" in
    docker)
      command -v dockerd >/dev/null || die "dockerd is not installed (apt-get install -y docker.io)"
      engine="exec dockerd -H $host --tls=false --data-root $root/data --exec-root $run/exec \
        --pidfile $run/dockerd.pid --bridge=none --iptables=false --ip-masq=false"
      ;;
    podman)
      command -v podman >/dev/null || die "podman is not installed (apt-get install -y podman)"
      # cgroupfs and file events: no systemd here. Its own storage, apart from any other
      # podman. Rootful podman gives containers nofile=1048576, which a machine whose root
      # lacks CAP_SYS_RESOURCE cannot grant ("error setting rlimit type 7"), and nproc above
      # its own (type 6). The pids cgroup (64) is the real cap on processes anyway.
      cat >"$root/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=$(ulimit -Hn):$(ulimit -Hn)", "nproc=4096:4096"]
[engine]
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
      engine="CONTAINERS_CONF=$root/containers.conf exec podman --root $root/storage \
        --runroot $run/runroot --tmpdir $run/tmp system service --time=0 $host"
      ;;
  esac
  log "starting $kind at $host in its own mount namespace (log: $logfile)"
  # unshare -m: mounts made here are seen by this engine only. The private tmpfs hides the
  # client's /dev/shm and /tmp, as on another machine. The engine works in its own state
  # folder: Podman's conmon writes an empty file `oom` into its working directory when a
  # container is OOM-killed, which would otherwise land wherever the caller stood.
  setsid unshare -m --propagation private sh -c "
    cd '$root' &&
    mount -t tmpfs -o mode=1777,size=4g selfheal-shm /dev/shm &&
    mount -t tmpfs -o mode=1777 selfheal-tmp /tmp &&
    $engine" >"$logfile" 2>&1 </dev/null &
  echo $! >"$pidfile"
  for _ in $(seq 1 240); do
    if answers; then
      log "$kind answers at $host (pid $(cat "$pidfile"))"
      echo "DOCKER_HOST=$host"
      return
    fi
    alive || die "$kind exited while starting; its log says: $(tail -c 1500 "$logfile")"
    sleep 0.25
  done
  die "$kind did not answer within 60 s; see $logfile"
}

stop() {
  if ! alive; then
    log "$kind at $host is not running"
    rm -f "$pidfile"
    return
  fi
  local pid
  pid=$(cat "$pidfile")
  if answers; then
    # Remove what is left through the API, so that no container outlives its engine.
    python3 - "$port" <<'EOF' || log "could not list the containers of $host"
import http.client, json, sys
port = int(sys.argv[1])
def call(method, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    c.request(method, path)
    r = c.getresponse()
    return r.status, r.read()
status, body = call("GET", "/containers/json?all=1")
for item in json.loads(body or b"[]"):
    call("DELETE", f"/containers/{item['Id']}?force=1")
    print(f"second-engine: removed container {item['Id'][:12]}", file=sys.stderr)
EOF
  fi
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 120); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.25
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "$kind (pid $pid) did not stop within 30 s; killing it"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
  log "$kind at $host stopped"
}

case "$action" in
  start) start ;;
  stop) stop ;;
  status)
    if alive && answers; then echo "DOCKER_HOST=$host"; else log "$kind at $host is not running"; exit 1; fi
    ;;
  *) die "usage: $0 start|stop|status docker|podman [PORT]" ;;
esac
