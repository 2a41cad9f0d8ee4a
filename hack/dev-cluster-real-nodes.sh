# shellcheck shell=bash
# The dev cluster's real nodes: per node a kubelet (built from the control plane's own module,
# hack/build-tools.sh) with its own containerd (root, state, socket) driving Debian's runc, in a
# mount namespace of its own, pods on one shared bridge. Sourced by hack/dev-cluster.sh, whose
# helpers (start_process, stop_pidfile, pid_alive, sign_cert, write_kubeconfig, kc, free_ports,
# wait_until, log, die) and variables ($state, $root, $pod_octet, $KUBE_BIN) it uses. See
# docs/src/contributing/dev-cluster-real-nodes.md.
#
# A pool is real when its count has `:kubelet` after it (`r7i.xlarge=1:kubelet`). Only amd64
# instance types: a real runtime runs arm64 images through binfmt_misc, which this machine
# cannot register (the arm64 pools stay on the node agent, which runs arm64 code under
# qemu-user itself).
#
# What each node changes on this machine, and how `down` takes it back:
#   - processes: a holder of the node's mount namespace, containerd, the kubelet (PIDs recorded
#     in pids/real-<node>-*.pid), and what containerd starts (shims, pause, containers), all in
#     that mount namespace: `down` stops the kubelet and containerd by PID, then kills every
#     process whose mount namespace is the node's (recorded in nodes/<node>/mnt-ns);
#   - an empty directory /run/containerd (the mount point of the node's own, in its namespace;
#     left in place);
#   - cgroups `/membench-<cluster>-<node>` in each hierarchy (the kubelet's cgroupRoot),
#     removed once empty;
#   - one bridge per cluster (`mbr<cluster>`) with an address per node; the bridge CNI plugin
#     adds a veth per pod, which goes with the pod's network namespace; `down` deletes the bridge.
# Nothing else: no iptables rule (the kubelet gets stubs and makes no chains; the bridge plugin
# masquerades nothing), IP forwarding stays off (isGateway false), and the sysctls the kubelet
# would set are private files in the node's mount namespace, which it only checks.

# The kubelet's allocatable: this machine's CPUs and memory less what is reserved, so that the
# pods of all real nodes together cannot take the machine (the node's pods' cgroup is capped at
# it). MEMBENCH_REAL_NODE_MEMORY is each node's allocatable memory.
real_node_memory=${MEMBENCH_REAL_NODE_MEMORY:-4Gi}
real_node_cpu_reserved=250m
# Real nodes are labelled and tainted as docs/src/getting-started/cluster.md's benchmark node
# groups are (`membench.io/pool=benchmarks`, `membench.io/benchmark=true:NoSchedule`), so the
# quickstart runs there unedited: only pods that tolerate the taint land there (the chart gives
# every benchmark pod that toleration). Pods of the fake nodes' tests that pick no node (the
# chart's operator, whose API server at 127.0.0.1 a pod's network namespace cannot reach) stay
# off them. MEMBENCH_REAL_NODE_TAINT= (empty) registers them untainted.
real_node_taint=${MEMBENCH_REAL_NODE_TAINT-membench.io/benchmark=true:NoSchedule}

# split_node_pools: $nodes into $agent_pools (for the node agent) and $real_nodes (one
# "name instance-type zone index" per real node).
split_node_pools() {
  local pool spec count kind zones=(us-east-1a us-east-1b us-east-1c) i seen=" "
  agent_pools=""
  real_nodes=()
  IFS=, read -ra pools <<<"$nodes"
  for pool in "${pools[@]}"; do
    [[ -n "$pool" ]] || continue
    spec=${pool%%=*}
    count=${pool#*=}
    [[ "$pool" == *=* ]] || count=1
    kind=agent
    if [[ "$count" == *:* ]]; then
      kind=${count#*:}
      count=${count%%:*}
      [[ "$kind" == kubelet ]] || die "pool '$pool': after the count only ':kubelet' is known (a real node)"
    fi
    [[ "$count" =~ ^[0-9]+$ ]] || die "pool '$pool': bad node count '$count'"
    [[ "$seen" != *" $spec "* ]] || die "pool '$spec' is named twice in MEMBENCH_DEV_CLUSTER_NODES ($nodes); give each instance type one pool"
    seen+="$spec "
    if [[ "$kind" == agent ]]; then
      agent_pools+="${agent_pools:+,}$spec=$count"
      continue
    fi
    [[ "$spec" =~ ^[a-z]+[0-9]+[a-z]*\.[0-9]*x?large$ ]] || die "pool '$pool': '$spec' is not an instance type"
    local family=${spec%%.*}
    [[ "$family" != *[0-9]g* ]] || die "pool '$pool': $spec is arm64 (Graviton); real nodes run amd64 only, since this machine cannot register binfmt_misc for a real runtime: leave arm64 pools on the node agent (drop ':kubelet')"
    for ((i = 0; i < count; i++)); do
      real_nodes+=("${spec//./-}-$i $spec ${zones[i % 3]} ${#real_nodes[@]}")
    done
  done
  ((${#real_nodes[@]} <= 16)) || die "at most 16 real nodes (each has a /24 of the cluster's /20 of pod addresses)"
}

# The cluster's pod network: a /20 inside 198.18.0.0/15, picked like the agent's pod addresses
# (the shared cluster first, a private one by its state directory), so two clusters on one
# machine never overlap. Node i gets the /24 at third octet base+i: its addresses .10-.250 for
# pods, .1 for the node itself (on the bridge).
real_network() {
  local cluster=$(((pod_octet - 100) / 8 % 32))
  real_cluster_id=$cluster
  real_net_second=$((18 + cluster * 16 / 256))
  real_net_third=$((cluster * 16 % 256))
  real_bridge=mbr$cluster
}

real_node_ip() { echo "198.$real_net_second.$((real_net_third + $1)).1"; }

real_node_dir() { echo "$state/nodes/$1"; }

any_real_nodes() { ((${#real_nodes[@]} > 0)); }

# The tools real nodes need, built or installed by the project's scripts when missing.
real_node_tools() {
  local bin_dir
  bin_dir=$("$root/hack/build-tools.sh" --print-bin-dir)
  CONTAINERD_BIN="$bin_dir/containerd-$CONTAINERD_VERSION"
  if [[ ! -x "$KUBE_BIN/kubelet" ]]; then
    log "building the kubelet $KUBERNETES_VERSION (about a minute once the control plane is built)"
    "$root/hack/build-tools.sh" kubernetes >&2
  fi
  if [[ ! -x "$CONTAINERD_BIN/containerd" || ! -x "$bin_dir/pause/pause" ]]; then
    log "building containerd $CONTAINERD_VERSION and the pause program (about two minutes)"
    "$root/hack/build-tools.sh" containerd >&2
  fi
  [[ -x /usr/sbin/runc && -x /usr/lib/cni/bridge && -x /usr/lib/cni/host-local ]] || {
    log "runc or the CNI plugins are missing; running hack/install-node-runtime.sh"
    "$root/hack/install-node-runtime.sh" >&2
  }
  command -v unshare >/dev/null && command -v nsenter >/dev/null && command -v ip >/dev/null ||
    die "real nodes need unshare, nsenter and ip: run hack/install-node-runtime.sh"
  local c
  for c in "$KUBE_BIN/kubelet" "$CONTAINERD_BIN/containerd" "$CONTAINERD_BIN/containerd-shim-runc-v2" "$CONTAINERD_BIN/ctr" /usr/sbin/runc; do
    [[ -x "$c" ]] || die "a real node needs $c, which is missing after building (see above)"
  done
}

# ensure_bridge: the cluster's bridge, up, with every real node's address.
ensure_bridge() {
  if ! ip link show "$real_bridge" >/dev/null 2>&1; then
    log "creating bridge $real_bridge for pods in 198.$real_net_second.$real_net_third.0/20 (no forwarding, no masquerade)"
    ip link add "$real_bridge" type bridge
    echo "$real_bridge" >"$state/bridge"
  fi
  ip link set "$real_bridge" up
  local node
  for node in "${real_nodes[@]}"; do
    read -r _ _ _ index <<<"$node"
    ip -4 addr show dev "$real_bridge" | grep -q " $(real_node_ip "$index")/" ||
      ip addr add "$(real_node_ip "$index")/20" dev "$real_bridge"
  done
}

write_real_node_configs() {
  local name=$1 index=$2 dir=$3 kubelet_port=$4 healthz_port=$5
  local ip
  ip=$(real_node_ip "$index")
  mkdir -p "$dir"/{var-lib,var-log,sysctl,bin,cni/net.d,cni/ipam,containerd/root,containerd/state,runc,cdi}
  # The values the kubelet wants (it checks them, protectKernelDefaults); the machine's own are
  # never touched.
  echo 1 >"$dir/sysctl/overcommit_memory"
  echo 10 >"$dir/sysctl/panic"
  echo 1 >"$dir/sysctl/panic_on_oops"
  # The kubelet calls iptables for its canary chains; these succeed and change nothing.
  local stub
  for stub in iptables ip6tables; do
    printf '#!/bin/sh\n# a real node must not add rules to this machine iptables\nexit 0\n' >"$dir/bin/$stub"
    chmod +x "$dir/bin/$stub"
  done
  cat >"$dir/cni/net.d/10-membench.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "membench-$real_cluster_id",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$real_bridge",
      "isGateway": false,
      "isDefaultGateway": false,
      "ipMasq": false,
      "hairpinMode": false,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "198.$real_net_second.$real_net_third.0/20", "rangeStart": "198.$real_net_second.$((real_net_third + index)).10", "rangeEnd": "198.$real_net_second.$((real_net_third + index)).250", "gateway": "$ip"}]],
        "dataDir": "$dir/cni/ipam"
      }
    }
  ]
}
EOF
  cat >"$dir/containerd.toml" <<EOF
version = 3
root = '$dir/containerd/root'
state = '$dir/containerd/state'
oom_score = 0
disabled_plugins = ['io.containerd.nri.v1.nri', 'io.containerd.snapshotter.v1.blockfile', 'io.containerd.snapshotter.v1.erofs', 'io.containerd.differ.v1.erofs']

[grpc]
  address = '$dir/containerd.sock'
[ttrpc]
  address = '$dir/containerd.sock.ttrpc'
[debug]
  address = ''
  level = 'info'
[metrics]
  address = ''

[plugins]
  [plugins.'io.containerd.internal.v1.opt']
    path = '$dir/containerd/opt'
  # Shim sockets need a short path (108 bytes at most); /var/lib is the node's own here.
  [plugins.'io.containerd.shim.v1.manager']
    socket_dir = '/var/lib/containerd-shims'
  [plugins.'io.containerd.image-verifier.v1.bindir']
    bin_dir = '$dir/containerd/image-verifier'
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = 'overlayfs'
    # The dev cluster's registry (hack/dev-cluster-registry.sh): its hosts.toml and CA, read at
    # every pull.
    [plugins.'io.containerd.cri.v1.images'.registry]
      config_path = '$state/registry/certs.d'
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = 'registry.k8s.io/pause:3.10.1'
  [plugins.'io.containerd.cri.v1.runtime']
    enable_selinux = false
    disable_apparmor = true
    # No CAP_SYS_RESOURCE here: without this runc fails ("can't get final child's PID from pipe").
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    cdi_spec_dirs = ['$dir/cdi']
    tolerate_missing_hugetlb_controller = true
    disable_hugetlb_controller = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = 'runc'
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = 'io.containerd.runc.v2'
        runtime_path = '$CONTAINERD_BIN/containerd-shim-runc-v2'
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = '/usr/sbin/runc'
          Root = '$dir/runc'
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = ['/usr/lib/cni']
      conf_dir = '$dir/cni/net.d'
      max_conf_num = 1
  [plugins.'io.containerd.grpc.v1.cri']
    disable_tcp_service = true
    stream_server_address = '127.0.0.1'
    stream_server_port = '0'
EOF
  # Allocatable = capacity - systemReserved - the hard eviction threshold: reserve all of this
  # machine's memory but $real_node_memory (and the threshold), and $real_node_cpu_reserved.
  local total_ki alloc_ki reserved_ki
  total_ki=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
  alloc_ki=$(numfmt --from=iec-i "$real_node_memory" | awk '{printf "%d", $1 / 1024}')
  reserved_ki=$((total_ki - alloc_ki - 100 * 1024))
  ((reserved_ki > 0)) || die "MEMBENCH_REAL_NODE_MEMORY=$real_node_memory is more than this machine has"
  cat >"$dir/kubelet-config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# cgroup v1 (hybrid) here: the kubelet refuses it since 1.35 unless told.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /membench-$real_cluster_id-$name
cgroupsPerQOS: true
enforceNodeAllocatable: ["pods"]
systemReserved:
  cpu: "$real_node_cpu_reserved"
  memory: "${reserved_ki}Ki"
containerRuntimeEndpoint: unix://$dir/containerd.sock
imageServiceEndpoint: unix://$dir/containerd.sock
# The API server reaches the kubelet at the node's InternalIP, its address on the bridge.
address: $ip
port: $kubelet_port
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $healthz_port
tlsCertFile: $state/pki/kubelet-$name.crt
tlsPrivateKeyFile: $state/pki/kubelet-$name.key
rotateCertificates: false
serverTLSBootstrap: false
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $state/pki/ca.crt}
authorization:
  mode: Webhook
resolvConf: ""
clusterDomain: cluster.local
protectKernelDefaults: true
kernelMemcgNotification: false
localStorageCapacityIsolation: true
failSwapOn: false
makeIPTablesUtilChains: false
maxPods: 20
# Imported images cannot be pulled again: no image GC, no disk eviction worth the name. The
# disk thresholds are absolute: the node's file system is this machine's, and 1% of a large
# disk is gigabytes that a build beside the tests may well take (1% of this machine's 252 GB
# is 2.5 GB: a CI run whose clone left less free saw every real-node test's engine end as if
# stopped), while pods here write almost nothing.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "256Mi"
  imagefs.available: "256Mi"
  nodefs.inodesFree: "1%"
serializeImagePulls: false
shutdownGracePeriod: 0s
EOF
}

# ctr_quiet ARGS...: ctr without its warning, on every call, that cgroup v1 is deprecated.
ctr_quiet() {
  "$CONTAINERD_BIN/ctr" "$@" 2> >(grep -v 'support for cgroup v1 is deprecated' >&2)
}

# import_node_images NAME DIR: pause, the membench image (this node's platform of
# hack/build-image.sh's archive, as ghcr.io/membench/membench:<version> and :dev) and the
# engine images (hack/node-images.sh). Each is also named by its digest, as a pulled image is
# (`redis@sha256:<manifest>`), so the kubelet reports the imageID a registry pull gives
# (`docker.io/library/redis@sha256:...`), and pinned, so its image GC never removes it.
import_node_images() {
  local name=$1 dir=$2 ctr=(ctr_quiet --address "$2/containerd.sock" --namespace k8s.io)
  preload_image() {
    local image=$1 digest
    digest=$("${ctr[@]}" images ls | awk -v ref="$image" '$1 == ref {print $3}')
    [[ -n "$digest" ]] || die "$name: $image is not among the imported images"
    "${ctr[@]}" images tag --force "$image" "${image%:*}@$digest" >/dev/null
    "${ctr[@]}" images label "$image" io.cri-containerd.pinned=pinned >/dev/null
    "${ctr[@]}" images label "${image%:*}@$digest" io.cri-containerd.pinned=pinned >/dev/null
  }
  local engine_build line archive image
  engine_build=$(dirname "$(readlink -f "$agent")")/membench-engine-build
  local images
  images=$("$root/hack/node-images.sh" "$(dirname "$("$root/hack/build-tools.sh" --print-bin-dir)")/node-images" "$engine_build") || die "building the real nodes' images failed (see above)"
  while read -r archive image; do
    "${ctr[@]}" images import --platform linux/amd64 "$archive" >/dev/null ||
      die "$name: ctr images import $archive failed"
    preload_image "$image"
  done <<<"$images"
  import_membench_image "$name" "$dir"
}

# membench_archive: the membench image archive this checkout's hack/build-image.sh wrote.
membench_archive() {
  echo "${MEMBENCH_IMAGE_ARCHIVE:-${CARGO_TARGET_DIR:-$root/target}/image/membench-oci.tar}"
}

# import_membench_image NAME DIR: this node's platform of the membench image archive, as
# ghcr.io/membench/membench:<version> and :dev, named by its digest and pinned; a log line
# when there is no archive (client pods cannot start there then).
import_membench_image() {
  local name=$1 dir=$2 ctr=(ctr_quiet --address "$2/containerd.sock" --namespace k8s.io)
  local archive version digest
  archive=$(membench_archive)
  if [[ ! -f "$archive" ]]; then
    log "$name: no membench image archive at $archive (hack/build-image.sh): client pods cannot start on this real node"
    return 0
  fi
  # The archive's tag is its index's ref.name (hack/build-image.sh: the version).
  version=$(tar -xOf "$archive" index.json | sed -n 's/.*"org.opencontainers.image.ref.name":"\([^"]*\)".*/\1/p')
  [[ -n "$version" ]] || die "$name: $archive names no tag (org.opencontainers.image.ref.name in index.json)"
  "${ctr[@]}" images import --platform linux/amd64 --base-name ghcr.io/membench/membench "$archive" >/dev/null ||
    die "$name: ctr images import $archive failed"
  "${ctr[@]}" images tag --force "ghcr.io/membench/membench:$version" ghcr.io/membench/membench:dev >/dev/null
  digest=$("${ctr[@]}" images ls | awk -v ref="ghcr.io/membench/membench:$version" '$1 == ref {print $3}')
  [[ -n "$digest" ]] || die "$name: ghcr.io/membench/membench:$version is not among the imported images"
  "${ctr[@]}" images tag --force "ghcr.io/membench/membench:$version" "ghcr.io/membench/membench@$digest" >/dev/null
  local image
  for image in "ghcr.io/membench/membench:$version" "ghcr.io/membench/membench@$digest" ghcr.io/membench/membench:dev; do
    "${ctr[@]}" images label "$image" io.cri-containerd.pinned=pinned >/dev/null
  done
}

# refresh_membench_image NAME DIR: a node that already runs keeps the images it was started
# with; when this checkout's archive holds another membench image than the node's :dev (a later
# build, or a node started where there was none), that image is imported, so the client pods
# run the binary under test and not an earlier one.
refresh_membench_image() {
  local name=$1 dir=$2 ctr=(ctr_quiet --address "$2/containerd.sock" --namespace k8s.io)
  local archive want have
  archive=$(membench_archive)
  [[ -f "$archive" ]] || return 0
  want=$(tar -xOf "$archive" index.json | sed -n 's/.*"digest":"\(sha256:[0-9a-f]*\)".*/\1/p' | head -1)
  have=$("${ctr[@]}" images ls | awk '$1 == "ghcr.io/membench/membench:dev" {print $3}')
  [[ -n "$want" && "$want" == "$have" ]] && return 0
  log "$name: its membench image (${have:-none}) is not this checkout's ($want): importing $archive"
  import_membench_image "$name" "$dir"
}

# start_real_node NAME TYPE ZONE INDEX
start_real_node() {
  local name=$1 type=$2 zone=$3 index=$4 dir
  dir=$(real_node_dir "$name")
  local ip
  ip=$(real_node_ip "$index")
  log "starting real node $name ($type, $zone, $ip): containerd $CONTAINERD_VERSION, kubelet $KUBERNETES_VERSION"
  rm -rf "$dir"
  local kubelet_port healthz_port
  read -r kubelet_port healthz_port < <(free_ports 2)
  sign_cert "node-$name" "/O=system:nodes/CN=system:node:$name" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=clientAuth"
  sign_cert "kubelet-$name" "/CN=$name" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:$ip,DNS:$name"
  write_real_node_configs "$name" "$index" "$dir" "$kubelet_port" "$healthz_port"
  write_kubeconfig "$dir/kubeconfig" "node-$name"

  # The mount namespace: the node's own /var/lib (kubelet, CNI, shims) and /var/log (pod logs),
  # the three sysctl files, and /run/containerd holding a link to the node's containerd socket:
  # the kubelet's cAdvisor finds containerd only at /run/containerd/containerd.sock, as on a
  # real node, and without it serves no container's own figures (only its pod's) on
  # /metrics/cadvisor. Its holder keeps it while containerd and the kubelet start.
  start_process "real-$name-namespace" unshare --mount --propagation private -- bash -c '
    set -e
    mount --bind "$1/var-lib" /var/lib
    mount --bind "$1/var-log" /var/log
    mount --bind "$1/sysctl/overcommit_memory" /proc/sys/vm/overcommit_memory
    mount --bind "$1/sysctl/panic" /proc/sys/kernel/panic
    mount --bind "$1/sysctl/panic_on_oops" /proc/sys/kernel/panic_on_oops
    mkdir -p /run/containerd "$1/run-containerd"
    ln -sfn "$1/containerd.sock" "$1/run-containerd/containerd.sock"
    mount --bind "$1/run-containerd" /run/containerd
    touch "$1/namespace-ready"
    exec sleep infinity' real-node "$dir"
  wait_until 10 "$name's mount namespace" test -e "$dir/namespace-ready"
  local holder
  read -r holder _ <"$state/pids/real-$name-namespace.pid"
  readlink "/proc/$holder/ns/mnt" >"$dir/mnt-ns"
  local enter=(nsenter "--mount=/proc/$holder/ns/mnt" --)

  start_process "real-$name-containerd" "${enter[@]}" "$CONTAINERD_BIN/containerd" --config "$dir/containerd.toml"
  wait_until 30 "$name's containerd" ctr_quiet --address "$dir/containerd.sock" --timeout 5s version
  import_node_images "$name" "$dir"

  # The kubelet's cgroupRoot must exist in every hierarchy; a new cpuset gets its parent's
  # CPUs and memory nodes, or no process could join it.
  local hierarchy cgroup
  for hierarchy in /sys/fs/cgroup/*/; do
    [[ -e "$hierarchy/cgroup.procs" && "$hierarchy" != */unified/ ]] || continue
    cgroup=$hierarchy/membench-$real_cluster_id-$name
    mkdir -p "$cgroup"
    if [[ -e "$cgroup/cpuset.cpus" ]]; then
      cat "$hierarchy/cpuset.cpus" >"$cgroup/cpuset.cpus"
      cat "$hierarchy/cpuset.mems" >"$cgroup/cpuset.mems"
    fi
  done
  # A node starts afresh (its containers were killed): the kubelet registers it again, with its
  # labels and taint (which a kubelet gives only a Node it creates).
  kc delete node "$name" --ignore-not-found --wait=false >/dev/null
  start_process "real-$name-kubelet" "${enter[@]}" env PATH="$dir/bin:$PATH" "$KUBE_BIN/kubelet" \
    --config="$dir/kubelet-config.yaml" \
    --kubeconfig="$dir/kubeconfig" \
    --hostname-override="$name" \
    --node-ip="$ip" \
    --node-labels="node.kubernetes.io/instance-type=$type,topology.kubernetes.io/zone=$zone,topology.kubernetes.io/region=us-east-1,membench.io/real-node=true,membench.io/pool=benchmarks" \
    ${real_node_taint:+--register-with-taints="$real_node_taint"} \
    --v=1
}

real_node_ready() {
  [[ "$(kc get node "$1" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" == True ]]
}

# wait_real_node_ready NAME: until the node is Ready, failing at once (with the end of its log)
# when its kubelet or containerd exits.
wait_real_node_ready() {
  local name=$1 deadline=$((SECONDS + 90)) component
  until real_node_ready "$name"; do
    for component in kubelet containerd; do
      pid_alive "$state/pids/real-$name-$component.pid" ||
        die "real node $name: $component exited; the end of $state/logs/real-$name-$component.log:
$(grep -v 'support for cgroup v1 is deprecated' "$state/logs/real-$name-$component.log" | tail -5)"
    done
    ((SECONDS < deadline)) || die "timed out after 90s waiting for real node $name to be Ready (log: $state/logs/real-$name-kubelet.log)"
    sleep 0.5
  done
}

# start_real_nodes: every real node of $real_nodes that does not run (its kubelet or containerd
# is dead, or it never started), then waits until they are all Ready.
start_real_nodes() {
  any_real_nodes || return 0
  real_node_tools
  real_network
  # The kubelets' client certificates (O=system:nodes) get the nodes' own role.
  kc create clusterrolebinding membench-real-nodes --clusterrole=system:node --group=system:nodes \
    --dry-run=client -o yaml | kc apply -f - >/dev/null
  ensure_bridge
  local node name type zone index started=()
  for node in "${real_nodes[@]}"; do
    read -r name type zone index <<<"$node"
    if pid_alive "$state/pids/real-$name-kubelet.pid" && pid_alive "$state/pids/real-$name-containerd.pid"; then
      refresh_membench_image "$name" "$(real_node_dir "$name")"
      continue
    fi
    stop_real_node "$name"
    start_real_node "$name" "$type" "$zone" "$index"
    started+=("$name")
  done
  for name in "${started[@]}"; do
    wait_real_node_ready "$name"
  done
}

# node_cgroups NAME: the node's cgroup (the kubelet's cgroupRoot) in each hierarchy.
node_cgroups() {
  local cgroup
  for cgroup in /sys/fs/cgroup/*/membench-"$real_cluster_id"-"$1"; do
    [[ -d "$cgroup" ]] && echo "$cgroup"
  done
  return 0
}

# stop_real_node NAME: the kubelet; the pods' processes (each in a PID and mount namespace of
# its own, so found by the node's cgroups); containerd; every process left in the node's mount
# namespace (the shims); its holder; and the node's cgroups, once empty.
stop_real_node() {
  local name=$1 dir ns p cgroup pid
  dir=$(real_node_dir "$name")
  stop_pidfile "$state/pids/real-$name-kubelet.pid"
  for _ in 1 2 3 4 5 6 7 8 9 10; do
    local left=0
    while read -r cgroup; do
      while read -r pid; do
        kill -KILL "$pid" 2>/dev/null && left=1
      done < <(find "$cgroup" -name cgroup.procs -exec cat {} + 2>/dev/null)
    done < <(node_cgroups "$name")
    ((left)) || break
    sleep 0.2
  done
  stop_pidfile "$state/pids/real-$name-containerd.pid"
  if [[ -f "$dir/mnt-ns" ]]; then
    ns=$(cat "$dir/mnt-ns")
    for p in /proc/[0-9]*; do
      if [[ "$(readlink "$p/ns/mnt" 2>/dev/null)" == "$ns" && "${p#/proc/}" != "$$" ]]; then
        kill -KILL "${p#/proc/}" 2>/dev/null || true
      fi
    done
  fi
  stop_pidfile "$state/pids/real-$name-namespace.pid"
  # Depth first: a cgroup with children cannot be removed.
  while read -r cgroup; do
    for _ in 1 2 3 4 5 6 7 8 9 10; do
      find "$cgroup" -depth -type d -exec rmdir {} + 2>/dev/null || true
      [[ -d "$cgroup" ]] || break
      sleep 0.2
    done
    [[ ! -d "$cgroup" ]] || log "WARNING: could not remove cgroup $cgroup (processes left in it?)"
  done < <(node_cgroups "$name")
}

# stop_real_nodes: every real node that was started in this state directory, and the bridge.
stop_real_nodes() {
  [[ -d "$state/nodes" ]] || { remove_bridge; return 0; }
  real_network
  local dir
  for dir in "$state"/nodes/*/; do
    [[ -d "$dir" ]] || continue
    stop_real_node "$(basename "$dir")"
  done
  remove_bridge
}

remove_bridge() {
  [[ -f "$state/bridge" ]] || return 0
  local bridge
  bridge=$(cat "$state/bridge")
  if ip link show "$bridge" >/dev/null 2>&1; then
    ip link delete "$bridge" || log "WARNING: could not delete bridge $bridge"
  fi
  rm -f "$state/bridge"
}

# real_nodes_status: one line per process of each real node.
real_nodes_status() {
  local file any_down=0
  for file in "$state"/pids/real-*.pid; do
    [[ -e "$file" ]] || continue
    process_status "$(basename "$file" .pid)" || any_down=1
  done
  [[ -f "$state/bridge" ]] && echo "bridge $(cat "$state/bridge"): $(ip -4 -br addr show dev "$(cat "$state/bridge")" 2>/dev/null | cut -c18-)"
  return $any_down
}
