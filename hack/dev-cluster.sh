#!/usr/bin/env bash
# The dev cluster: a real Kubernetes control plane (etcd, kube-apiserver, kube-scheduler,
# kube-controller-manager, built by hack/build-tools.sh) on loopback, plus fake nodes whose pods
# the membench node agent runs as local processes (it stands in for kubelet and a container
# runtime; it is test infrastructure, not something users deploy), and real nodes where a pool
# asks for them (a kubelet with containerd and runc each: hack/dev-cluster-real-nodes.sh), and an
# image registry they pull from (CNCF distribution, TLS and basic auth: hack/dev-cluster-registry.sh).
# See docs/src/contributing/dev-cluster.md.
#
# usage: hack/dev-cluster.sh up       start it (a quick no-op when already up); prints
#                                     `export KUBECONFIG=<path>` on stdout, progress on stderr
#        hack/dev-cluster.sh down     stop every process it started and remove its state
#        hack/dev-cluster.sh status   say what runs (the registry's address among it)
#        hack/dev-cluster.sh restart-apiserver
#                                     stop kube-apiserver and start it again on the same port
#                                     (a fault for tests: every client's watch breaks and
#                                     reconnects; nothing else restarts)
#        hack/dev-cluster.sh stop-kubelet NODE
#                                     stop a real node's kubelet (a fault for tests: its
#                                     containers keep running, nothing reports for the node, which
#                                     turns NotReady; the next `up` starts the node afresh)
#
# environment:
#   MEMBENCH_DEV_CLUSTER_DIR    state directory (default ~/.cache/membench/dev-cluster)
#   MEMBENCH_DEV_CLUSTER_NODES  node pools (default r8g.4xlarge=2,r7i.4xlarge=2): instance type =
#                               count, and `:kubelet` after the count for real nodes
#                               (r7i.xlarge=1:kubelet; amd64 types only)
#   MEMBENCH_DEV_CLUSTER_EXTRA_NODES  pools added to those (tests that need a real node ask for
#                               one this way); on a running cluster, `up` starts the real nodes
#                               of both that do not run yet
#   MEMBENCH_REAL_NODE_MEMORY   allocatable memory of each real node (default 4Gi)
#   MEMBENCH_REAL_NODE_TAINT    taint of real nodes (default membench.io/benchmark=true:NoSchedule;
#                               empty: none)
#   MEMBENCH_REAL_NODE_ENGINE_IMAGES  engine images to preload on real nodes (default: one per
#                               version the engine store has; see hack/node-images.sh)
#   MEMBENCH_NODE_AGENT_BIN     node agent binary to run (default: built here with cargo)
#   MEMBENCH_BIN                membench binary the agent runs for the membench image on the
#                               nodes of its architecture (default: the image archive below,
#                               else the newest membench build for the node's architecture)
#   MEMBENCH_IMAGE_ARCHIVE      the membench image's OCI archive, unpacked per node platform
#                               (default: target/image/membench-oci.tar, from hack/build-image.sh)
#   MEMBENCH_ENGINE_STORE       the engine store whose builds stand in for engine images
#   MEMBENCH_DEV_CLUSTER_OPERATOR=1  also start the operator (see start_operator below)
#   MEMBENCH_DEV_CLUSTER_LOCK_TIMEOUT  seconds to wait for another `up`/`down` of the same state
#                               directory (default 1800: a first `up` builds the tools)
#
# kubectl is the one hack/build-tools.sh builds from the control plane's own release (a kubectl
# found on PATH may be several minor versions older, outside the supported version skew).
#
# Everything binds to loopback only, runs detached from the calling shell (setsid, so it
# survives that shell exiting) and needs no systemd; `down` stops processes by recorded PID.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
state=${MEMBENCH_DEV_CLUSTER_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/membench/dev-cluster}
nodes=${MEMBENCH_DEV_CLUSTER_NODES:-r8g.4xlarge=2,r7i.4xlarge=2}
# Extra pools, except for an instance type the pools above already have.
IFS=, read -ra extra_pools <<<"${MEMBENCH_DEV_CLUSTER_EXTRA_NODES:-}"
for extra_pool in "${extra_pools[@]}"; do
  [[ -n "$extra_pool" && ",$nodes" != *",${extra_pool%%=*}="* ]] && nodes+=",$extra_pool"
done
kubeconfig="$state/kubeconfig"
default_state=${XDG_CACHE_HOME:-$HOME/.cache}/membench/dev-cluster
# Pod addresses are 127.<octet+i>.y.z for fake node i. The shared cluster starts at 100; a
# private one (another state directory) gets a block of 8 octets picked from its path, so two
# clusters on one machine never hand out the same pod address. MEMBENCH_POD_ADDRESS_OCTET
# overrides it.
if [[ -n "${MEMBENCH_POD_ADDRESS_OCTET:-}" ]]; then
  pod_octet=$MEMBENCH_POD_ADDRESS_OCTET
elif [[ "$(realpath -m "$state")" == "$(realpath -m "$default_state")" ]]; then
  pod_octet=100
else
  pod_octet=$((108 + 8 * ($(printf '%s' "$(realpath -m "$state")" | cksum | cut -d' ' -f1) % 18)))
fi
# Stop order: the reverse of start order, so pods stop before the agent and the API server
# outlives its clients.
components=(operator node-agent registry kube-controller-manager kube-scheduler kube-apiserver etcd)

log() { printf '[dev-cluster] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# shellcheck source=hack/dev-cluster-real-nodes.sh
source "$root/hack/dev-cluster-real-nodes.sh"
# shellcheck source=hack/dev-cluster-registry.sh
source "$root/hack/dev-cluster-registry.sh"

# --- processes ------------------------------------------------------------------------------

# The kernel's start time of a process (field 22 of /proc/PID/stat), recorded next to its PID
# so that `down` never signals an unrelated process that reused the PID.
proc_start_time() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  # shellcheck disable=SC2086
  set -- $stat
  echo "${20}"
}

# pid_alive PIDFILE: true when the process recorded in PIDFILE still runs (a zombie that its
# new parent has not reaped yet counts as dead).
pid_alive() {
  local pid start stat
  [[ -f "$1" ]] || return 1
  read -r pid start <"$1" || return 1
  [[ -n "$pid" && "$(proc_start_time "$pid" 2>/dev/null)" == "$start" ]] || return 1
  stat=$(cat "/proc/$pid/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [[ "${stat:0:1}" != Z && "${stat:0:1}" != X ]]
}

# start_process NAME COMMAND...: runs COMMAND detached (own session, stdin from /dev/null,
# output to logs/NAME.log) and records its PID. The subshell execs setsid, which (not being a
# process group leader) execs COMMAND in place, so $! is COMMAND's own PID. fd 9 holds our
# lock and must not leak into a long-lived child, or the next `up` would wait forever.
start_process() {
  local name=$1
  shift
  (exec setsid "$@" </dev/null >>"$state/logs/$name.log" 2>&1 9>&-) &
  local pid=$!
  local start=""
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    start=$(proc_start_time "$pid" 2>/dev/null) && break
    sleep 0.05
  done
  [[ -n "$start" ]] || die "$name exited at once; see $state/logs/$name.log"
  echo "$pid $start" >"$state/pids/$name.pid"
}

# process_status NAME: "running (pid N)" or "DEAD (log: ...)" for pids/NAME.pid; false when dead.
process_status() {
  local pid
  if pid_alive "$state/pids/$1.pid"; then
    read -r pid _ <"$state/pids/$1.pid"
    printf '%-32s running (pid %s)\n' "$1" "$pid"
  else
    printf '%-32s DEAD (log: %s)\n' "$1" "$state/logs/$1.log"
    return 1
  fi
}

# stop_pidfile PIDFILE: SIGTERM, then SIGKILL after 10 seconds.
stop_pidfile() {
  local file=$1 pid start
  pid_alive "$file" || { rm -f "$file"; return 0; }
  read -r pid start <"$file"
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do
    pid_alive "$file" || { rm -f "$file"; return 0; }
    sleep 0.1
  done
  log "$(basename "$file" .pid) (pid $pid) ignored SIGTERM for 10s; killing it"
  kill -KILL "$pid" 2>/dev/null || true
  rm -f "$file"
}

# free_ports N: N distinct TCP ports nobody listens on, from 20000-31999: below Linux's ephemeral
# range (32768 and up), so an outgoing connection never takes one before its server binds it.
free_ports() {
  local want=$1 found=() listening p
  listening=$(ss -Htln | awk '{print $4}' | sed 's/.*://' | sort -u)
  while ((${#found[@]} < want)); do
    p=$((20000 + RANDOM % 12000))
    grep -qx "$p" <<<"$listening" && continue
    [[ " ${found[*]} " == *" $p "* ]] && continue
    found+=("$p")
  done
  echo "${found[@]}"
}

# wait_until SECONDS DESCRIPTION COMMAND...: retries COMMAND every half second. COMMAND itself
# must be bounded (curl --max-time, kubectl --request-timeout), so the deadline holds.
wait_until() {
  local timeout=$1 what=$2
  shift 2
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "timed out after ${timeout}s waiting for $what (logs: $state/logs)"
    sleep 0.5
  done
}

# --- certificates ---------------------------------------------------------------------------

# sign_cert NAME SUBJECT EXTENSIONS: a P-256 key and a certificate for it signed by our CA.
sign_cert() {
  local name=$1 subject=$2 ext=$3 pki="$state/pki"
  openssl ecparam -name prime256v1 -genkey -noout -out "$pki/$name.key" 2>/dev/null
  openssl req -new -key "$pki/$name.key" -subj "$subject" -out "$pki/$name.csr"
  printf '%s\n' "$ext" >"$pki/$name.ext"
  openssl x509 -req -in "$pki/$name.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 3650 -sha256 -extfile "$pki/$name.ext" -out "$pki/$name.crt" 2>/dev/null
  rm -f "$pki/$name.csr" "$pki/$name.ext"
}

make_pki() {
  local pki="$state/pki"
  mkdir -p "$pki"
  openssl ecparam -name prime256v1 -genkey -noout -out "$pki/ca.key" 2>/dev/null
  openssl req -x509 -new -key "$pki/ca.key" -subj "/CN=membench-dev-cluster-ca" -days 3650 -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out "$pki/ca.crt"
  local client="basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
  # The API server's serving certificate also names the in-cluster service (first address of
  # the service range) so in-cluster clients that verify it can.
  sign_cert apiserver "/CN=kube-apiserver" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  # system:masters bypasses RBAC; the scheduler and controller manager get the user names the
  # API server's bootstrap RBAC policy grants their permissions to.
  sign_cert admin "/O=system:masters/CN=membench-admin" "$client"
  sign_cert kube-scheduler "/CN=system:kube-scheduler" "$client"
  sign_cert kube-controller-manager "/CN=system:kube-controller-manager" "$client"
  # `kubectl logs`: the API server calls the node agent's kubelet endpoint with this client
  # certificate and checks the endpoint's serving certificate against our CA.
  sign_cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" "$client"
  sign_cert node-agent "/CN=membench-node-agent" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,DNS:localhost"
  # Service-account token signing keys.
  openssl ecparam -name prime256v1 -genkey -noout -out "$pki/sa.key" 2>/dev/null
  openssl ec -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
}

# write_kubeconfig FILE USER: a kubeconfig with the CA and the user's certificate embedded, so it
# stays valid if copied elsewhere on this machine.
write_kubeconfig() {
  local file=$1 user=$2 pki="$state/pki"
  cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: membench-dev
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority-data: $(base64 -w0 "$pki/ca.crt")
users:
- name: $user
  user:
    client-certificate-data: $(base64 -w0 "$pki/$user.crt")
    client-key-data: $(base64 -w0 "$pki/$user.key")
contexts:
- name: membench-dev
  context:
    cluster: membench-dev
    user: $user
current-context: membench-dev
EOF
  chmod 600 "$file"
}

# --- components -----------------------------------------------------------------------------

tool_bin_dir() {
  local bin_dir
  bin_dir=$("$root/hack/build-tools.sh" --print-bin-dir)
  # shellcheck source=hack/tool-versions.env
  source "$root/hack/tool-versions.env"
  KUBE_BIN="$bin_dir/kubernetes-$KUBERNETES_VERSION"
  ETCD_BIN="$bin_dir/etcd-$ETCD_VERSION"
  KUBECTL="$KUBE_BIN/kubectl"
}

build_tools_if_needed() {
  if [[ -x "$KUBE_BIN/kube-apiserver" && -x "$KUBE_BIN/kube-scheduler" &&
    -x "$KUBE_BIN/kube-controller-manager" && -x "$KUBECTL" && -x "$ETCD_BIN/etcd" ]]; then
    return
  fi
  log "building the control plane and kubectl (the first time takes about 10 minutes on 2 cores)"
  "$root/hack/build-tools.sh" etcd kubernetes >&2
  [[ -x "$KUBECTL" ]] || die "hack/build-tools.sh built no kubectl at $KUBECTL"
}

# kc ARGS...: the control plane's own kubectl against this cluster. Every request is bounded,
# so no wait below can hang on an API server that accepts connections and never answers.
kc() {
  [[ -x "$KUBECTL" ]] || die "no kubectl $KUBERNETES_VERSION at $KUBECTL; run hack/build-tools.sh kubernetes"
  "$KUBECTL" --kubeconfig="$kubeconfig" --request-timeout=20s "$@"
}

# The node agent binary: MEMBENCH_NODE_AGENT_BIN, or built now (quick when up to date).
node_agent_bin() {
  if [[ -n "${MEMBENCH_NODE_AGENT_BIN:-}" ]]; then
    [[ -x "$MEMBENCH_NODE_AGENT_BIN" ]] || die "MEMBENCH_NODE_AGENT_BIN=$MEMBENCH_NODE_AGENT_BIN is not executable"
    echo "$MEMBENCH_NODE_AGENT_BIN"
    return
  fi
  log "building membench-node-agent"
  # The whole workspace, as hack/test.sh and the README build it: building one package alone
  # resolves other crate features and recompiles kube and its dependencies a second time.
  # Run from a test, this shell inherits the test's CARGO_* variables (CARGO_MANIFEST_DIR among
  # them), which ring's build script tracks: cargo would rebuild ring, rustls and kube in
  # every test run. Build with the environment of a plain shell instead, keeping
  # CARGO_INCREMENTAL (hack/test.sh turns it off): a different setting rebuilds the workspace.
  (
    cd "$root"
    for var in $(compgen -e | grep '^CARGO_' | grep -vx -e CARGO_HOME -e CARGO_TARGET_DIR -e CARGO_INCREMENTAL); do
      unset "$var"
    done
    cargo build --quiet --workspace --bins
  ) >&2
  echo "${CARGO_TARGET_DIR:-$root/target}/debug/membench-node-agent"
}

# What identifies the agent build that runs, so `up` can restart the agent after a rebuild.
binary_identity() { stat -c '%n %s %Y' "$(readlink -f "$1")"; }

start_etcd() {
  log "starting etcd on 127.0.0.1:$ETCD_PORT"
  # --unsafe-no-fsync: the data is thrown away on `down`, and fsync dominates etcd's latency.
  start_process etcd "$ETCD_BIN/etcd" \
    --name=membench-dev \
    --data-dir="$state/etcd" \
    --listen-client-urls="http://127.0.0.1:$ETCD_PORT" \
    --advertise-client-urls="http://127.0.0.1:$ETCD_PORT" \
    --listen-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-advertise-peer-urls="http://127.0.0.1:$ETCD_PEER_PORT" \
    --initial-cluster="membench-dev=http://127.0.0.1:$ETCD_PEER_PORT" \
    --unsafe-no-fsync \
    --log-level=warn
  wait_until 30 "etcd /health" curl -fsS --max-time 5 "http://127.0.0.1:$ETCD_PORT/health"
}

start_apiserver() {
  local pki="$state/pki"
  log "starting kube-apiserver on https://127.0.0.1:$APISERVER_PORT"
  # --endpoint-reconciler-type=none: there is one API server on loopback and no in-cluster
  # client that could use the `kubernetes` service's endpoints anyway.
  # --kubelet-preferred-address-types=InternalIP: fake nodes have no resolvable host name.
  # --enable-admission-plugins=PodSecurity: on by default since 1.25; named so that a release
  # without it fails here instead of silently admitting pods a `restricted` namespace refuses
  # (the tests' namespaces all enforce `restricted`, as a platform team's cluster would).
  start_process kube-apiserver "$KUBE_BIN/kube-apiserver" \
    --etcd-servers="http://127.0.0.1:$ETCD_PORT" \
    --bind-address=127.0.0.1 \
    --advertise-address=127.0.0.1 \
    --secure-port="$APISERVER_PORT" \
    --tls-cert-file="$pki/apiserver.crt" \
    --tls-private-key-file="$pki/apiserver.key" \
    --client-ca-file="$pki/ca.crt" \
    --authorization-mode=RBAC \
    --enable-admission-plugins=PodSecurity \
    --service-cluster-ip-range=10.96.0.0/16 \
    --service-account-issuer=https://kubernetes.default.svc.cluster.local \
    --service-account-key-file="$pki/sa.pub" \
    --service-account-signing-key-file="$pki/sa.key" \
    --endpoint-reconciler-type=none \
    --allow-privileged=true \
    --kubelet-preferred-address-types=InternalIP \
    --kubelet-certificate-authority="$pki/ca.crt" \
    --kubelet-client-certificate="$pki/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$pki/apiserver-kubelet-client.key" \
    --cert-dir="$state/apiserver-certs"
  wait_until 90 "kube-apiserver /readyz" kc get --raw /readyz
}

start_scheduler() {
  log "starting kube-scheduler (healthz on https://127.0.0.1:$SCHEDULER_PORT)"
  start_process kube-scheduler "$KUBE_BIN/kube-scheduler" \
    --kubeconfig="$state/kube-scheduler.kubeconfig" \
    --leader-elect=false \
    --bind-address=127.0.0.1 \
    --secure-port="$SCHEDULER_PORT" \
    --cert-dir="$state/scheduler-certs"
}

start_controller_manager() {
  local pki="$state/pki"
  log "starting kube-controller-manager (healthz on https://127.0.0.1:$CONTROLLER_MANAGER_PORT)"
  # The garbage collector (owner references) and the node lifecycle controller (which evicts
  # pods from nodes whose heartbeats stop) are the controllers the tests rely on. A node that
  # stops reporting is NotReady after 20 s instead of 50 (the node agent renews its Leases
  # every 4 s), so a test of a lost node takes tens of seconds, not minutes.
  start_process kube-controller-manager "$KUBE_BIN/kube-controller-manager" \
    --node-monitor-grace-period=20s \
    --node-monitor-period=2s \
    --kubeconfig="$state/kube-controller-manager.kubeconfig" \
    --leader-elect=false \
    --bind-address=127.0.0.1 \
    --secure-port="$CONTROLLER_MANAGER_PORT" \
    --cert-dir="$state/controller-manager-certs" \
    --use-service-account-credentials=true \
    --service-account-private-key-file="$pki/sa.key" \
    --root-ca-file="$pki/ca.crt" \
    --cluster-signing-cert-file="$pki/ca.crt" \
    --cluster-signing-key-file="$pki/ca.key"
}

wait_healthz() {
  local name=$1 port=$2
  wait_until 60 "$name /healthz" curl -fsSk --max-time 5 "https://127.0.0.1:$port/healthz"
}

start_node_agent() {
  local bin=$1
  log "starting membench-node-agent (fake nodes: ${agent_pools:-none})"
  # The agent registers the fake nodes, keeps them Ready with heartbeats and runs their pods.
  start_process node-agent env KUBECONFIG="$kubeconfig" RUST_LOG="${RUST_LOG:-info}" \
    "$bin" --node-pools="$agent_pools" --state-dir="$state/node-agent" --repo-root="$root" \
    --kubelet-address="127.0.0.1:$NODE_AGENT_PORT" \
    --kubelet-tls-cert="$state/pki/node-agent.crt" --kubelet-tls-key="$state/pki/node-agent.key" \
    --kubelet-client-ca="$state/pki/ca.crt" --pod-address-octet="$pod_octet"
  binary_identity "$bin" >"$state/node-agent.binary"
}

count_ready_fake_nodes() {
  kc get nodes -l membench.io/fake-node=true \
    -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}' 2>/dev/null |
    grep -c '^True$' || true
}

wanted_node_count() {
  local total=0 pool
  IFS=, read -ra pools <<<"$agent_pools"
  for pool in "${pools[@]}"; do total=$((total + ${pool#*=})); done
  echo "$total"
}

fake_nodes_ready() { [[ "$(count_ready_fake_nodes)" -ge "$(wanted_node_count)" ]]; }

# crds_established NAME...: every named CRD has condition Established=True. A CRD the API server
# has only just stored has no status at all, which reads as "not yet" (unlike `kubectl wait
# --for=condition`, which some kubectl versions fail on when .status.conditions is missing).
crds_established() {
  local name status
  for name in "$@"; do
    status=$(kc get "$name" -o 'jsonpath={.status.conditions[?(@.type=="Established")].status}') || return 1
    [[ "$status" == True ]] || return 1
  done
}

install_crds() {
  compgen -G "$root/crds/*.yaml" >/dev/null || return 0
  log "installing crds/"
  # A CRD the API server rejects (schema, CEL cost) is the operator's bug, not the cluster's:
  # say so loudly, but leave the cluster up so that it can be fixed and applied again.
  local applied
  if ! applied=$(kc apply --server-side --force-conflicts -f "$root/crds/" -o name); then
    log "WARNING: the API server rejected crds/ (see above); the cluster is up without them"
    return 0
  fi
  # Only the CRDs applied here: another CRD of the cluster is none of our business.
  # shellcheck disable=SC2086
  wait_until 60 "crds/ to be Established ($(echo $applied))" crds_established $applied
}

# --- operator hook (issue: starting the operator is a later issue) ---------------------------
# When MEMBENCH_DEV_CLUSTER_OPERATOR=1 and a built membench binary has an `operator` subcommand,
# run it against the dev cluster like any other component. Nothing else here depends on it.
start_operator() {
  [[ "${MEMBENCH_DEV_CLUSTER_OPERATOR:-0}" == 1 ]] || return 0
  pid_alive "$state/pids/operator.pid" && return 0
  local bin
  bin=$(ls -t "${CARGO_TARGET_DIR:-$root/target}"/{release,debug}/membench 2>/dev/null | head -1 || true)
  if [[ -z "$bin" ]] || ! "$bin" operator --help >/dev/null 2>&1; then
    log "MEMBENCH_DEV_CLUSTER_OPERATOR=1 but no built membench with an 'operator' subcommand; not starting it"
    return 0
  fi
  log "starting the operator ($bin operator)"
  start_process operator env KUBECONFIG="$kubeconfig" "$bin" operator
}

# --- commands -------------------------------------------------------------------------------

# True when the control plane runs and the API server answers.
control_plane_up() {
  local c
  for c in etcd kube-apiserver kube-scheduler kube-controller-manager; do
    pid_alive "$state/pids/$c.pid" || return 1
  done
  kc get --raw /readyz >/dev/null 2>&1
}

cmd_up() {
  local agent
  split_node_pools
  build_tools_if_needed
  agent=$(node_agent_bin)
  if control_plane_up; then
    # shellcheck disable=SC1091
    source "$state/ports.env"
    if [[ -z "${NODE_AGENT_PORT:-}" ]]; then
      # A cluster started by an older version of this script.
      NODE_AGENT_PORT=$(free_ports 1)
      echo "NODE_AGENT_PORT=$NODE_AGENT_PORT" >>"$state/ports.env"
    fi
    # Already up: a no-op, except that a dead or rebuilt node agent is (re)started; its pods'
    # processes are then reported lost, as a kubelet reports containers it cannot find.
    if ! pid_alive "$state/pids/node-agent.pid"; then
      log "the node agent is not running; starting it"
      start_node_agent "$agent"
      wait_until 60 "the fake nodes to be Ready" fake_nodes_ready
    elif [[ "$(binary_identity "$agent")" != "$(cat "$state/node-agent.binary" 2>/dev/null)" ]]; then
      log "node agent binary changed; restarting the node agent"
      stop_pidfile "$state/pids/node-agent.pid"
      start_node_agent "$agent"
      wait_until 60 "the fake nodes to be Ready" fake_nodes_ready
    fi
    start_real_nodes
    start_registry
    start_operator
    announce
    return
  fi
  if [[ -d "$state" ]]; then
    log "found a partly running dev cluster in $state; stopping it and starting afresh"
    stop_all
  fi
  local started=$SECONDS
  mkdir -p "$state/pids" "$state/logs"
  read -r ETCD_PORT ETCD_PEER_PORT APISERVER_PORT SCHEDULER_PORT CONTROLLER_MANAGER_PORT NODE_AGENT_PORT < <(free_ports 6)
  cat >"$state/ports.env" <<EOF
ETCD_PORT=$ETCD_PORT
ETCD_PEER_PORT=$ETCD_PEER_PORT
APISERVER_PORT=$APISERVER_PORT
SCHEDULER_PORT=$SCHEDULER_PORT
CONTROLLER_MANAGER_PORT=$CONTROLLER_MANAGER_PORT
NODE_AGENT_PORT=$NODE_AGENT_PORT
EOF
  make_pki
  write_kubeconfig "$kubeconfig" admin
  write_kubeconfig "$state/kube-scheduler.kubeconfig" kube-scheduler
  write_kubeconfig "$state/kube-controller-manager.kubeconfig" kube-controller-manager
  start_etcd
  start_apiserver
  start_scheduler
  start_controller_manager
  wait_healthz kube-scheduler "$SCHEDULER_PORT"
  wait_healthz kube-controller-manager "$CONTROLLER_MANAGER_PORT"
  start_node_agent "$agent"
  wait_until 60 "the fake nodes to be Ready" fake_nodes_ready
  # Pods can only be created once the service account controller made `default`.
  wait_until 60 "the default service account" kc get serviceaccount default -n default
  start_real_nodes
  start_registry
  install_crds
  start_operator
  log "up in $((SECONDS - started))s; state and logs in $state"
  announce
}

# announce: the export line on stdout (for eval), and on stderr which kubectl goes with it.
announce() {
  log "kubectl $KUBERNETES_VERSION for this cluster: $KUBECTL (export PATH=\"$KUBE_BIN:\$PATH\")"
  echo "export KUBECONFIG=$kubeconfig"
}

stop_all() {
  local c
  stop_pidfile "$state/pids/operator.pid"
  stop_real_nodes
  for c in "${components[@]}"; do stop_pidfile "$state/pids/$c.pid"; done
  # Pod processes the agent could not stop (it was killed, or crashed) are recorded by it.
  local f
  for f in "$state"/node-agent/pods/*/*.pid; do
    [[ -e "$f" ]] || continue
    if pid_alive "$f"; then
      local pid
      read -r pid _ <"$f"
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  # Bind mounts live in the pods' private mount namespaces, which end with their processes, so
  # nothing is left mounted and the state can simply be removed.
  rm -rf "$state"
}

cmd_down() {
  if [[ ! -d "$state" ]]; then
    log "not running (no $state)"
    return
  fi
  stop_all
  log "stopped and removed $state"
}

cmd_restart_apiserver() {
  control_plane_up || die "the dev cluster is not up (hack/dev-cluster.sh up)"
  # shellcheck disable=SC1091
  source "$state/ports.env"
  log "restarting kube-apiserver"
  stop_pidfile "$state/pids/kube-apiserver.pid"
  start_apiserver
}

cmd_stop_kubelet() {
  local name=${1:-}
  [[ -n "$name" ]] || die "usage: hack/dev-cluster.sh stop-kubelet NODE"
  [[ -f "$state/pids/real-$name-kubelet.pid" ]] || die "no real node $name in $state (hack/dev-cluster.sh status lists them)"
  log "stopping the kubelet of real node $name (its containers keep running)"
  stop_pidfile "$state/pids/real-$name-kubelet.pid"
}

cmd_status() {
  if [[ ! -d "$state" ]]; then
    echo "dev cluster: down (no $state)"
    return 3
  fi
  local c any_down=0
  for c in "${components[@]}"; do
    if [[ ! -f "$state/pids/$c.pid" ]]; then
      [[ "$c" == operator ]] && continue
      printf '%-24s not started\n' "$c"
      any_down=1
    else
      process_status "$c" || any_down=1
    fi
  done
  real_nodes_status || any_down=1
  [[ -f "$state/registry/registry.env" ]] && registry_status
  if [[ ! -x "$KUBECTL" ]]; then
    echo "kubectl $KUBERNETES_VERSION: not built ($KUBECTL); run hack/build-tools.sh kubernetes"
    any_down=1
  elif kc get --raw /readyz >/dev/null 2>&1; then
    # shellcheck disable=SC1091
    source "$state/ports.env"
    echo "kube-apiserver ready at https://127.0.0.1:$APISERVER_PORT"
    kc get nodes -L node.kubernetes.io/instance-type,kubernetes.io/arch,topology.kubernetes.io/zone,membench.io/real-node
    echo "export KUBECONFIG=$kubeconfig"
  else
    echo "kube-apiserver: not answering"
    any_down=1
  fi
  return $any_down
}

case "${1:-}" in
  up | down | status | restart-apiserver | stop-kubelet) ;;
  *) echo "usage: $0 up|down|status|restart-apiserver|stop-kubelet NODE" >&2; exit 2 ;;
esac

tool_bin_dir

# `status` only reads, and must answer while an `up` is busy building.
if [[ "$1" == status ]]; then
  cmd_status
  exit
fi

# One `up`, `down` or restart at a time per state directory: tests in several processes may all
# call `up`.
mkdir -p "$(dirname "$state")"
exec 9>"$state.lock"
lock_timeout=${MEMBENCH_DEV_CLUSTER_LOCK_TIMEOUT:-1800}
flock -w "$lock_timeout" 9 ||
  die "another 'hack/dev-cluster.sh up/down' has held $state.lock for ${lock_timeout}s; is it stuck? (MEMBENCH_DEV_CLUSTER_LOCK_TIMEOUT)"

case "$1" in
  up) cmd_up ;;
  down) cmd_down ;;
  restart-apiserver) cmd_restart_apiserver ;;
  stop-kubelet) cmd_stop_kubelet "${2:-}" ;;
esac
