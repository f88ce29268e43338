#!/usr/bin/env bash
# A real, small Kubernetes on this machine for KubernetesSandbox's tests: the four
# binaries built once from Debian's own source, then etcd, the API server, the controller
# manager, the scheduler and a kubelet whose pods run on a Docker engine of their own.
# As root, on Debian 12. Idempotent, like setup-engine.sh.
#
#   sandbox/setup-kubernetes.sh packages     # install what the build and the cluster need (apt)
#   sandbox/setup-kubernetes.sh build        # build (or find cached) binaries; prints their folder
#   sandbox/setup-kubernetes.sh start        # build if needed, start; prints KUBECONFIG=...
#   sandbox/setup-kubernetes.sh stop         # delete every pod, stop all of it
#   sandbox/setup-kubernetes.sh status       # prints KUBECONFIG=... when the node is Ready
#   sandbox/setup-kubernetes.sh image REF    # copy the sandbox image REF to the node's engine
#   sandbox/setup-kubernetes.sh run CMD...   # start, run CMD, stop all of it on exit
#
# The binaries are cached in SELFHEAL_KUBERNETES_CACHE (default
# ~/.cache/selfheal-jupyter/kubernetes/VERSION/bin) and rebuilt only when Debian's source
# version changes. The source comes through apt by package name (a deb-src entry in a
# private apt state folder: the system's apt is left as it is). Go 1.19 refuses the 1.20
# go.mod in vendor mode, hence GOPATH mode. Three changes to the source (see patch_source).
set -euo pipefail

log() { printf 'setup-kubernetes: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

cache=${SELFHEAL_KUBERNETES_CACHE:-$HOME/.cache/selfheal-jupyter/kubernetes}
state=${SELFHEAL_KUBERNETES_STATE:-/var/lib/selfheal-kubernetes}
run=/run/selfheal-kubernetes
kubeconfig=$state/admin.kubeconfig
engine_sock=$run/docker.sock
api_port=${SELFHEAL_KUBERNETES_PORT:-16443}
etcd_port=23790
etcd_peer_port=23800
kubelet_port=10250

[ "$(id -u)" = 0 ] || die "needs root (it installs packages, starts an engine and a kubelet)"

# --- packages --------------------------------------------------------------------------

ensure_packages() {
  local missing=()
  command -v go >/dev/null 2>&1 || missing+=(golang-go)
  command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
  command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
  command -v dpkg-source >/dev/null 2>&1 || missing+=(dpkg-dev)
  command -v gcc >/dev/null 2>&1 || missing+=(gcc libc6-dev)
  command -v openssl >/dev/null 2>&1 || missing+=(openssl)
  [ -d /usr/share/gocode/src/github.com/modern-go/reflect2 ] ||
    missing+=(golang-github-modern-go-reflect2-dev)
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]} with apt"
    apt-get update -q >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}" >/dev/null
  fi
}

# --- the private apt state: Debian's source, by package name -----------------------------

apt_dir=$cache/apt
apt_opts=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$apt_dir/sources"
  -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::Cache=$apt_dir/cache")

source_version() {  # Debian's current source version of kubernetes (lists refreshed daily)
  mkdir -p "$apt_dir/sources" "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial"
  local suite
  suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")
  cat >"$apt_dir/sources/debian-src.sources" <<EOF
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: $suite-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  if [ -z "$(find "$apt_dir/lists" -maxdepth 1 -name '*Sources*' -mtime -1 2>/dev/null | head -1)" ]; then
    apt-get "${apt_opts[@]}" update -q >/dev/null 2>&1 || log "could not refresh Debian's source lists; using what is known"
  fi
  apt-cache "${apt_opts[@]}" showsrc kubernetes 2>/dev/null |
    sed -n 's/^Version: //p' | sort -V | tail -1
}

cached_bin() {  # the folder of complete cached binaries, if any (newest version first)
  local dir
  for dir in $(ls -1d "$cache"/*/bin 2>/dev/null | sort -rV); do
    [ -f "$dir/.complete" ] && { echo "$dir"; return 0; }
  done
  return 1
}

# --- the build ---------------------------------------------------------------------------

patch_source() {  # $1 = the unpacked source tree
  local src=$1
  # 1. reflect2 1.0.1 (vendored) crashes under Go >= 1.18; Debian's packaged one does not.
  rm -rf "$src/vendor/github.com/modern-go/reflect2"
  cp -r /usr/share/gocode/src/github.com/modern-go/reflect2 "$src/vendor/github.com/modern-go/"
  # 2. This machine (a VM without CAP_SYS_RESOURCE) cannot lower a process's oom_score_adj:
  #    the kubelet's negative ones for the pod sandbox (-998) and Guaranteed pods (-997)
  #    make runc fail. Zero is what a process may set without privilege.
  sed -i 's/^\(\s*defaultSandboxOOMAdj int = \)-998$/\10/' "$src/pkg/kubelet/dockershim/docker_sandbox.go"
  sed -i 's/^\(\s*guaranteedOOMScoreAdj int = \)-997$/\10/' "$src/pkg/kubelet/qos/policy.go"
  grep -q 'defaultSandboxOOMAdj int = 0$' "$src/pkg/kubelet/dockershim/docker_sandbox.go" &&
    grep -q 'guaranteedOOMScoreAdj int = 0$' "$src/pkg/kubelet/qos/policy.go" ||
    die "the oom_score_adj constants were not where expected in this source; update patch_source"
  # 3. pkg/generated/openapi is generated (not in the tarball); the API server needs it.
  #    The same inputs as Makefile.generated_files: every package tagged +k8s:openapi-gen,
  #    staging named as vendor, without code-generator's and sample-apiserver's.
  local pkg=k8s.io/kubernetes dirs
  dirs=$(cd "$src" && find -H . \( -path ./_\* -o -path ./.\* -o -path ./vendor -o -path ./debian \) -prune \
      -o -type f -name '*.go' -print |
    xargs grep -l '^// *+k8s:' | xargs grep -l '+k8s:openapi-gen=' |
    sed 's|^\./staging/src|vendor|; s|^\./||; s|/[^/]*$||' | LC_ALL=C sort -u |
    grep -v -e '^vendor/k8s.io/code-generator/' -e '^vendor/k8s.io/sample-apiserver/' |
    sed "s|^|$pkg/|" | paste -sd, -)
  [ -n "$dirs" ] || die "found no +k8s:openapi-gen packages in the source"
  go build -o "$GOPATH/bin/openapi-gen" "$pkg/vendor/k8s.io/kube-openapi/cmd/openapi-gen"
  "$GOPATH/bin/openapi-gen" --logtostderr -i "$dirs" -p "$pkg/pkg/generated/openapi" \
    -O zz_generated.openapi -h "$src/vendor/k8s.io/code-generator/hack/boilerplate.go.txt" \
    -r "$GOPATH/openapi-violations.report" >/dev/null
  [ -s "$src/pkg/generated/openapi/zz_generated.openapi.go" ] || die "openapi-gen wrote nothing"
}

fetch_kubectl() {  # Debian's kubectl of the same release (no need to compile a client)
  local tmp
  tmp=$(mktemp -d)
  (cd "$tmp" && { apt-get download -q kubernetes-client >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null && apt-get download -q kubernetes-client >/dev/null; }; }) ||
    die "apt-get download kubernetes-client failed"
  dpkg-deb -x "$tmp"/kubernetes-client_*.deb "$tmp/x"
  cp "$tmp/x/usr/bin/kubectl" "$1/kubectl"
  rm -rf "$tmp"
}

build() {
  ensure_packages
  # One build at a time: `make test` starts one in the background, the tests' start waits.
  mkdir -p "$cache"
  exec 9>"$cache/.build.lock"
  flock 9
  local version upstream out work src started
  version=$(source_version)
  if [ -z "$version" ]; then
    cached_bin && return 0
    die "Debian's source lists name no kubernetes package (and nothing is cached): check the network"
  fi
  out=$cache/$version/bin
  if [ -f "$out/.complete" ]; then
    echo "$out"
    return 0
  fi
  upstream=${version%-*}
  upstream=${upstream#*:}
  upstream=${upstream##*really}
  log "building Kubernetes $upstream from Debian's source $version (once; 12-22 min on 2 cores)"
  started=$(date +%s)
  work=$cache/build
  rm -rf "$work"
  mkdir -p "$work/src"
  (cd "$work/src" && apt-get "${apt_opts[@]}" source -q "kubernetes=$version" >/dev/null 2>&1) ||
    die "apt-get source kubernetes=$version failed"
  src=$(ls -1d "$work"/src/kubernetes-*/ | head -1)
  src=${src%/}
  export GOPATH=$work/gopath GO111MODULE=off GOPROXY=off GOFLAGS= CGO_ENABLED=0
  export GOCACHE=${SELFHEAL_KUBERNETES_GOCACHE:-$work/go-build}
  mkdir -p "$GOPATH/src/k8s.io" "$GOPATH/bin"
  ln -sfn "$src" "$GOPATH/src/k8s.io/kubernetes"
  cd "$GOPATH/src/k8s.io/kubernetes"
  patch_source "$src"
  local v=k8s.io/kubernetes/vendor/k8s.io
  local major=${upstream%%.*} minor
  minor=${upstream#*.}
  minor=${minor%%.*}
  local ldflags="-s -w"
  local p
  for p in "$v/component-base/version" "$v/client-go/pkg/version"; do
    ldflags+=" -X $p.gitVersion=v$upstream -X $p.gitMajor=$major -X $p.gitMinor=$minor"
    ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  done
  rm -rf "$out.tmp"
  mkdir -p "$out.tmp"
  go build -o "$out.tmp/" -ldflags "$ldflags" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubelet
  fetch_kubectl "$out.tmp"
  # The pod sandbox's image: the pause program of the same source, static.
  gcc -Os -static -o "$out.tmp/pause" "$src/build/pause/linux/pause.c"
  { grep -rho 'k8s.gcr.io/pause:[0-9.]*' "$src/pkg/kubelet/dockershim/docker_sandbox.go" || true; } |
    head -1 >"$out.tmp/pause.image"
  [ -s "$out.tmp/pause.image" ] || die "the pause image's name was not found in the source"
  cd /
  rm -rf "$out"
  mv "$out.tmp" "$out"
  echo "$version" >"$out/.complete"
  log "built in $(($(date +%s) - started)) s: $out"
  if [ "${SELFHEAL_KUBERNETES_KEEP_BUILD:-0}" != 1 ]; then
    rm -rf "$work"
  fi
  echo "$out"
}

# --- the running cluster -----------------------------------------------------------------

pki=$state/pki
logs=$run/logs
kubectl() { "$bin/kubectl" --kubeconfig "$kubeconfig" "$@"; }
alive() { [ -f "$run/$1.pid" ] && kill -0 "$(cat "$run/$1.pid")" 2>/dev/null; }

launch() {  # NAME COMMAND...: in the background, in a session of its own, pid recorded
  local name=$1
  shift
  alive "$name" && return 0
  mkdir -p "$logs"
  # No descriptor beyond 0-2: a daemon holding a lock's (this script's, or its caller's, as
  # in `flock FILE setup-kubernetes.sh start`) keeps every later holder waiting while it runs.
  (
    for fd in /proc/self/fd/*; do
      fd=${fd##*/}
      [ "$fd" -gt 2 ] && eval "exec $fd>&-"
    done
    exec setsid "$@" >"$logs/$name.log" 2>&1 </dev/null
  ) &
  echo $! >"$run/$name.pid"
}

wait_for() {  # SECONDS WHAT COMMAND...: until COMMAND succeeds
  local seconds=$1 what=$2 end
  shift 2
  end=$(($(date +%s) + seconds))
  until "$@" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$end" ] || die "$what did not come up within $seconds s (logs: $logs)"
    sleep 0.3
  done
}

certificate() {  # NAME CN [O] [SERVER]: a key and a certificate signed by the cluster's CA
  local name=$1 cn=$2 org=${3:-} server=${4:-} subject ext
  [ -f "$pki/$name.crt" ] && return 0
  subject="/CN=$cn${org:+/O=$org}"
  ext="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth${server:+,serverAuth}"
  [ -n "$server" ] && ext="$ext
subjectAltName=DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,IP:127.0.0.1,IP:10.0.0.1"
  openssl req -new -nodes -newkey rsa:2048 -keyout "$pki/$name.key" -out "$pki/$name.csr" -subj "$subject" 2>/dev/null
  openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 3650 -out "$pki/$name.crt" -extfile <(echo "$ext") 2>/dev/null
  rm -f "$pki/$name.csr"
}

kubeconfig_for() {  # NAME: a kubeconfig with NAME's certificate
  cat >"$state/$1.kubeconfig.tmp" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: selfheal
  cluster:
    certificate-authority: $pki/ca.crt
    server: https://127.0.0.1:$api_port
users:
- name: $1
  user:
    client-certificate: $pki/$1.crt
    client-key: $pki/$1.key
contexts:
- name: selfheal
  context: {cluster: selfheal, user: $1, namespace: default}
current-context: selfheal
EOF
  mv "$state/$1.kubeconfig.tmp" "$state/$1.kubeconfig"
}

make_pki() {
  mkdir -p "$pki"
  chmod 700 "$pki"
  if [ ! -f "$pki/ca.crt" ]; then
    openssl req -x509 -new -nodes -newkey rsa:2048 -keyout "$pki/ca.key" -out "$pki/ca.crt" \
      -days 3650 -subj "/CN=selfheal-kubernetes-ca" 2>/dev/null
  fi
  [ -f "$pki/service-account.key" ] || {
    openssl genrsa -out "$pki/service-account.key" 2048 2>/dev/null
    openssl rsa -in "$pki/service-account.key" -pubout -out "$pki/service-account.pub" 2>/dev/null
  }
  certificate apiserver kube-apiserver "" server
  certificate apiserver-kubelet-client kube-apiserver-kubelet-client system:masters
  certificate admin admin system:masters
  certificate controller-manager system:kube-controller-manager
  certificate scheduler system:kube-scheduler
  certificate kubelet system:node:localhost system:nodes
  local name
  for name in admin controller-manager scheduler kubelet; do kubeconfig_for "$name"; done
}

# The pods' network leads nowhere: a CNI plugin that gives a pod, beside its loopback, an
# eth0 that is a tun device nothing holds (no carrier) with one link-local address and no
# route (the kubelet restarts a pod whose sandbox reports no IP). Connecting anywhere fails with "network
# unreachable", as under `docker run --network none`. A sandbox is reached over the attach
# stream and needs nothing else; in a real cluster the sandbox's NetworkPolicy denies its
# egress instead.
make_cni() {
  mkdir -p "$state/cni/bin" "$state/cni/conf"
  cat >"$state/cni/bin/selfheal-none" <<'EOF'
#!/bin/sh
# CNI: ADD puts an eth0 that leads nowhere (a tun device nothing holds, a link-local /32,
# no route) into the pod's network namespace.
cat >/dev/null
case "$CNI_COMMAND" in
  ADD)
    n=$(printf %s "$CNI_CONTAINERID" | cksum | cut -d' ' -f1)
    ip="169.254.$((n / 256 % 254 + 1)).$((n % 254 + 1))"
    if [ "$CNI_IFNAME" = eth0 ]; then
      nsenter --net="$CNI_NETNS" ip tuntap add eth0 mode tun 2>/dev/null || true
      nsenter --net="$CNI_NETNS" ip addr add "$ip/32" dev eth0 2>/dev/null || true
      nsenter --net="$CNI_NETNS" ip link set eth0 up
    else
      nsenter --net="$CNI_NETNS" ip link set lo up
    fi
    printf '{"cniVersion": "0.4.0", "interfaces": [{"name": "%s"}], "ips": [{"version": "4", "address": "%s/32", "interface": 0}], "dns": {}}\n' "$CNI_IFNAME" "$ip"
    ;;
  VERSION) echo '{"cniVersion": "0.4.0", "supportedVersions": ["0.3.0", "0.3.1", "0.4.0"]}' ;;
esac
EOF
  chmod 755 "$state/cni/bin/selfheal-none"
  ln -sf selfheal-none "$state/cni/bin/loopback"
  echo '{"cniVersion": "0.4.0", "name": "nowhere", "type": "selfheal-none"}' >"$state/cni/conf/10-nowhere.conf"
  rm -f "$state/cni/conf/10-none.conf"
}

engine() { docker -H "unix://$engine_sock" "$@"; }

start_engine() {
  if ! alive engine; then
    mkdir -p "$state/engine" "$run/engine"
    echo '{}' >"$state/engine.json"  # not /etc/docker/daemon.json: the sandbox engine's
    launch engine dockerd --config-file "$state/engine.json" -H "unix://$engine_sock" --data-root "$state/engine" \
      --exec-root "$run/engine" --pidfile "$run/dockerd.pid" --bridge=none --iptables=false \
      --ip-masq=false --exec-opt native.cgroupdriver=cgroupfs
  fi
  wait_for 60 "the kubelet's Docker engine" engine info
  local pause_image
  pause_image=$(cat "$bin/pause.image")
  if ! engine image inspect "$pause_image" >/dev/null 2>&1; then
    local tmp
    tmp=$(mktemp -d)
    cp "$bin/pause" "$tmp/pause"
    tar -C "$tmp" -c pause | engine import --change 'ENTRYPOINT ["/pause"]' - "$pause_image" >/dev/null
    rm -rf "$tmp"
  fi
}

start() {
  mkdir -p "$run"
  exec 8>"$run/.lock"  # one start or stop at a time (two test sessions may ask at once)
  flock 8
  bin=$(build | tail -1)
  [ -x "$bin/kube-apiserver" ] || die "no binaries in $bin"
  mkdir -p "$state" "$run"
  ensure_packages
  make_pki
  make_cni
  start_engine
  launch etcd etcd --name selfheal --data-dir "$state/etcd" \
    --listen-client-urls "http://127.0.0.1:$etcd_port" --advertise-client-urls "http://127.0.0.1:$etcd_port" \
    --listen-peer-urls "http://127.0.0.1:$etcd_peer_port" \
    --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer_port" \
    --initial-cluster "selfheal=http://127.0.0.1:$etcd_peer_port" --log-level warn
  launch apiserver "$bin/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcd_port" \
    --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
    --insecure-port 0 --anonymous-auth=false --allow-privileged=false \
    --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
    --service-cluster-ip-range 10.0.0.0/24 --client-ca-file "$pki/ca.crt" \
    --tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
    --kubelet-client-certificate "$pki/apiserver-kubelet-client.crt" \
    --kubelet-client-key "$pki/apiserver-kubelet-client.key" \
    --kubelet-preferred-address-types Hostname \
    --service-account-key-file "$pki/service-account.pub" \
    --service-account-signing-key-file "$pki/service-account.key" \
    --service-account-issuer https://kubernetes.default.svc
  wait_for 90 "the API server" kubectl get --raw /readyz
  launch controller-manager "$bin/kube-controller-manager" --kubeconfig "$state/controller-manager.kubeconfig" \
    --bind-address 127.0.0.1 --port 0 --leader-elect=false \
    --service-account-private-key-file "$pki/service-account.key" --root-ca-file "$pki/ca.crt" \
    --use-service-account-credentials=true --controllers '*,-nodeipam,-route,-service'
  launch scheduler "$bin/kube-scheduler" --kubeconfig "$state/scheduler.kubeconfig" \
    --bind-address 127.0.0.1 --port 0 --leader-elect=false
  mkdir -p "$state/kubelet"
  cat >"$state/kubelet-config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
port: $kubelet_port
readOnlyPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $pki/ca.crt}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
failSwapOn: false
podPidsLimit: ${SELFHEAL_KUBERNETES_POD_PIDS:-1024}
oomScoreAdj: 0
featureGates: {SizeMemoryBackedVolumes: true}
imageGCHighThresholdPercent: 100
evictionHard: {memory.available: "100Mi", nodefs.available: "2%", imagefs.available: "2%"}
resolvConf: /etc/resolv.conf
EOF
  launch kubelet "$bin/kubelet" --config "$state/kubelet-config.yaml" \
    --kubeconfig "$state/kubelet.kubeconfig" --hostname-override localhost \
    --container-runtime docker --docker-endpoint "unix://$engine_sock" \
    --pod-infra-container-image "$(cat "$bin/pause.image")" --root-dir "$state/kubelet" \
    --cert-dir "$state/kubelet/pki" --network-plugin cni --cni-bin-dir "$state/cni/bin" \
    --cni-conf-dir "$state/cni/conf" --register-node
  wait_for 120 "the node" node_ready
  log "Kubernetes $("$bin/kube-apiserver" --version | awk '{print $2}') is up (API https://127.0.0.1:$api_port)"
  echo "KUBECONFIG=$kubeconfig"
}

node_ready() {  # Ready since the kubelet started, and its not-ready taint lifted
  local said ready heartbeat
  said=$(kubectl get node localhost -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].lastHeartbeatTime} {.spec.taints}')
  read -r ready heartbeat _ <<<"$said"
  [ "$ready" = True ] && [ "$said" = "$ready $heartbeat " ] &&
    [ "$(date -d "$heartbeat" +%s)" -ge "$(stat -c %Y "$run/kubelet.pid")" ]
}

stop() {
  local bin
  mkdir -p "$run"
  exec 8>"$run/.lock"
  flock 8
  bin=$(cached_bin || true)
  if [ -n "$bin" ] && alive apiserver && alive kubelet; then
    # Pods first, through the API, so that the kubelet stops their containers itself.
    "$bin/kubectl" --kubeconfig "$kubeconfig" delete pods --all --all-namespaces \
      --grace-period 0 --force --wait=false >/dev/null 2>&1 || true
  fi
  local name pid
  for name in kubelet scheduler controller-manager apiserver etcd; do
    if alive "$name"; then
      pid=$(cat "$run/$name.pid")
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$run/$name.pid"
  done
  if alive engine; then
    # Every container the kubelet left (pods, their pause containers), then the engine.
    local ids
    ids=$(engine ps -aq 2>/dev/null || true)
    [ -z "$ids" ] || engine rm -f $ids >/dev/null 2>&1 || true
    pid=$(cat "$run/engine.pid")
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 150); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$run/engine.pid"
  # What the kubelet and the engine mounted outlives them: pod volumes (tmpfs emptyDirs),
  # and each one's own folder, bind-mounted onto itself. Deepest first.
  awk -v state="$state" '$2 == state "/kubelet" || $2 == state "/engine" ||
    index($2, state "/kubelet/") == 1 || index($2, state "/engine/") == 1 {print $2}' /proc/mounts |
    sort -r | while read -r mount; do
      umount "$mount" 2>/dev/null || umount -l "$mount" 2>/dev/null || true
    done
  log "stopped"
}

status() {
  bin=$(cached_bin) || die "not built"
  alive apiserver && alive kubelet && node_ready || die "not running"
  echo "KUBECONFIG=$kubeconfig"
}

load_image() {  # REF: the sandbox image into the kubelet's engine (docker save | docker load)
  local ref=$1
  alive engine || die "the cluster is not running (start it first)"
  if engine image inspect "$ref" >/dev/null 2>&1; then
    log "$ref is already on the node"
    return 0
  fi
  docker image inspect "$ref" >/dev/null 2>&1 || die "$ref is not on this machine's engine (selfheal sandbox build)"
  log "copying $ref to the node's engine"
  docker save "$ref" | engine load >/dev/null
}

case "${1:-}" in
  packages) ensure_packages ;;
  build) build ;;
  start) start ;;
  stop) stop ;;
  status) status ;;
  image) [ -n "${2:-}" ] || die "usage: $0 image REF"; load_image "$2" ;;
  run)
    shift
    [ $# -gt 0 ] || die "usage: $0 run CMD..."
    start >/dev/null
    trap stop EXIT
    KUBECONFIG=$kubeconfig "$@"
    ;;
  *) die "usage: $0 packages|build|start|stop|status|image REF|run CMD..." ;;
esac
