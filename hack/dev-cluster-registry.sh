# shellcheck shell=bash
# The dev cluster's image registry: CNCF distribution's `registry` (hack/build-tools.sh
# registry), on 127.0.0.1 with a serving certificate from the cluster's CA and htpasswd (bcrypt)
# basic auth, holding the images under the names a user's mirror would: the membench image
# (hack/build-image.sh's archive, both platforms) as `membench/membench:<version>`, and the
# stand-in engine images (hack/node-images.sh) as `library/redis:<v>`, `valkey/valkey:<v>` and
# `dragonflydb/dragonfly:v<v>`. The real nodes' containerd pull from it through its registry
# configuration (`config_path`: certs.d/<host>/hosts.toml and the CA), with the credentials of
# a pod's imagePullSecret, as a kubelet pulls for a user. Sourced by hack/dev-cluster.sh, whose
# helpers (start_process, pid_alive, process_status, sign_cert, free_ports, wait_until, log,
# die) and variables ($state, $root) it uses. See docs/src/contributing/dev-cluster-registry.md.
#
# What it leaves in the state directory, all of which `down` removes with it:
#   registry/registry.env   REGISTRY (host:port), REGISTRY_USER, REGISTRY_PASSWORD, REGISTRY_CA
#   registry/config.yml     the registry's configuration
#   registry/htpasswd       the bcrypt password file (htpasswd -B)
#   registry/data/          the registry's storage (filesystem driver)
#   registry/certs.d/       containerd's hosts directory for the real nodes (config_path): the
#                           registry's own host, and docker.io and ghcr.io mirrored by it
#   registry/pushed/        what was pushed, so an `up` pushes only what changed
#   pki/registry.{crt,key}  its serving certificate; logs/registry.log its log (access lines)

registry_dir() { echo "$state/registry"; }

# The registry's binary, built when missing.
registry_bin() {
  local bin
  bin="$("$root/hack/build-tools.sh" --print-bin-dir)/registry-$REGISTRY_VERSION/registry"
  if [[ ! -x "$bin" ]]; then
    log "building the image registry (distribution $REGISTRY_VERSION; a few minutes the first time)"
    "$root/hack/build-tools.sh" registry >&2
  fi
  [[ -x "$bin" ]] || die "hack/build-tools.sh built no registry at $bin"
  echo "$bin"
}

# registry_tools: htpasswd and skopeo, installed by hack/install-node-runtime.sh when missing.
registry_tools() {
  command -v htpasswd >/dev/null && command -v skopeo >/dev/null && return 0
  log "htpasswd or skopeo is missing; running hack/install-node-runtime.sh"
  "$root/hack/install-node-runtime.sh" >&2
  command -v htpasswd >/dev/null || die "no htpasswd after hack/install-node-runtime.sh (Debian's apache2-utils)"
  command -v skopeo >/dev/null || die "no skopeo after hack/install-node-runtime.sh (Debian's skopeo)"
}

# write_registry_config: port, password, certificate, htpasswd file, configuration and the
# real nodes' hosts directory, each made once (a restarted registry keeps its address, so a
# node's configuration and a pull Secret stay valid).
write_registry_config() {
  local dir
  dir=$(registry_dir)
  mkdir -p "$dir/data" "$dir/pushed"
  if [[ ! -f "$dir/registry.env" ]]; then
    local port password
    port=$(free_ports 1)
    password=$(openssl rand -hex 16)
    cat >"$dir/registry.env" <<EOF
REGISTRY=127.0.0.1:$port
REGISTRY_USER=membench
REGISTRY_PASSWORD=$password
REGISTRY_CA=$state/pki/ca.crt
EOF
    chmod 600 "$dir/registry.env"
  fi
  # shellcheck disable=SC1091
  source "$dir/registry.env"
  [[ -f "$state/pki/registry.crt" ]] || sign_cert registry "/CN=membench-dev-registry" "basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=IP:127.0.0.1,DNS:localhost"
  [[ -f "$dir/htpasswd" ]] || htpasswd -B -b -c "$dir/htpasswd" "$REGISTRY_USER" "$REGISTRY_PASSWORD" 2>/dev/null ||
    die "htpasswd -B could not write $dir/htpasswd"
  cat >"$dir/config.yml" <<EOF
version: 0.1
log:
  level: info
  formatter: text
  accesslog:
    disabled: false
storage:
  filesystem:
    rootdirectory: $dir/data
  delete:
    enabled: true
http:
  addr: $REGISTRY
  secret: $(openssl rand -hex 16)
  tls:
    certificate: $state/pki/registry.crt
    key: $state/pki/registry.key
auth:
  htpasswd:
    realm: membench-dev-cluster
    path: $dir/htpasswd
EOF
  # containerd's hosts directory (one per registry host, named host:port): the CA beside the
  # hosts.toml that names it. Read at every pull, so nodes need no restart when it changes.
  local hosts="$dir/certs.d/$REGISTRY"
  mkdir -p "$hosts"
  cp "$state/pki/ca.crt" "$hosts/ca.crt"
  write_hosts_toml "$hosts" "$hosts/ca.crt"
  # docker.io and ghcr.io mirrored by this registry, as a node-wide mirror with its own
  # credentials would be: the images a chart installed unedited names (ghcr.io/membench/membench,
  # docker.io/library/redis, docker.io/valkey/valkey) pull from here with no pull Secret.
  # `server` is the registry too, so a name it lacks fails the pull instead of falling back to
  # the internet.
  local upstream
  for upstream in docker.io ghcr.io; do
    write_hosts_toml "$dir/certs.d/$upstream" "$hosts/ca.crt" \
      "Basic $(printf '%s' "$REGISTRY_USER:$REGISTRY_PASSWORD" | base64 -w0)"
  done
}

# write_hosts_toml DIR CA [AUTHORIZATION]: DIR/hosts.toml, whose only host (`server` too) is the
# registry, trusted through CA, with an `authorization` header on every request when given
# (the file is then readable by root only).
write_hosts_toml() {
  local dir=$1 ca=$2 authorization=${3:-}
  mkdir -p "$dir"
  cat >"$dir/hosts.toml" <<EOF
server = "https://$REGISTRY"

[host."https://$REGISTRY"]
  capabilities = ["pull", "resolve"]
  ca = "$ca"
EOF
  if [[ -n "$authorization" ]]; then
    chmod 600 "$dir/hosts.toml"
    cat >>"$dir/hosts.toml" <<EOF
  [host."https://$REGISTRY".header]
    authorization = "$authorization"
EOF
  fi
}

# registry_ready: /v2/ answers 401 without credentials and 200 with them, over TLS the CA
# vouches for.
registry_ready() {
  local code
  code=$(curl -sS --max-time 5 --cacert "$state/pki/ca.crt" -o /dev/null -w '%{http_code}' "https://$REGISTRY/v2/") || return 1
  [[ "$code" == 401 ]] || return 1
  curl -fsS --max-time 5 --cacert "$state/pki/ca.crt" -u "$REGISTRY_USER:$REGISTRY_PASSWORD" -o /dev/null "https://$REGISTRY/v2/"
}

# start_registry: the registry, unless it runs; then pushes what is not pushed yet.
start_registry() {
  registry_tools
  write_registry_config
  if ! pid_alive "$state/pids/registry.pid"; then
    local bin
    bin=$(registry_bin)
    log "starting the image registry on https://$REGISTRY (distribution $REGISTRY_VERSION, user $REGISTRY_USER)"
    # No trace exporter: distribution's default (OTLP) would post spans to a collector.
    start_process registry env OTEL_TRACES_EXPORTER=none OTEL_METRICS_EXPORTER=none OTEL_LOGS_EXPORTER=none \
      "$bin" serve "$(registry_dir)/config.yml"
  fi
  wait_until 30 "the registry at https://$REGISTRY/v2/" registry_ready
  push_registry_images
}

# registry_name IMAGE: where IMAGE (a full name, `docker.io/library/redis:8.2.3`) goes in the
# registry: its registry host replaced (`$REGISTRY/library/redis:8.2.3`).
registry_name() {
  local image=$1 first=${1%%/*}
  if [[ "$image" == */* && ( "$first" == *.* || "$first" == *:* || "$first" == localhost ) ]]; then
    image=${image#*/}
  fi
  echo "$REGISTRY/$image"
}

# push_archive ARCHIVE REF DESTINATION [SKOPEO_FLAGS...]: skopeo copy of REF in the OCI
# archive to the registry, unless this archive was pushed there already. Uncompressed layers
# are gzipped on the way (skopeo does so for a registry), as an image in a mirror is.
push_archive() {
  local archive=$1 ref=$2 destination=$3 key marker
  shift 3
  key=$(stat -c '%n %s %Y' "$(readlink -f "$archive")")
  marker="$(registry_dir)/pushed/$(tr '/:' '__' <<<"${destination#*/}")"
  [[ "$(cat "$marker" 2>/dev/null)" == "$key" ]] && return 0
  log "pushing $destination"
  skopeo copy --quiet "$@" --dest-cert-dir "$(registry_dir)/certs.d/$REGISTRY" \
    --dest-creds "$REGISTRY_USER:$REGISTRY_PASSWORD" \
    "oci-archive:$archive${ref:+:$ref}" "docker://$destination" >&2 ||
    die "skopeo could not push $archive to $destination (log: $state/logs/registry.log)"
  echo "$key" >"$marker"
}

# push_registry_images: the membench image when its archive exists, and the engine images when
# the cluster has real nodes (whose tools, the pause program among them, node-images.sh needs).
push_registry_images() {
  local membench_archive=${MEMBENCH_IMAGE_ARCHIVE:-${CARGO_TARGET_DIR:-$root/target}/image/membench-oci.tar}
  if [[ -f "$membench_archive" ]]; then
    local version
    version=$(tar -xOf "$membench_archive" index.json | sed -n 's/.*"org.opencontainers.image.ref.name":"\([^"]*\)".*/\1/p')
    [[ -n "$version" ]] || die "$membench_archive names no tag (org.opencontainers.image.ref.name in index.json)"
    push_archive "$membench_archive" "$version" "$REGISTRY/membench/membench:$version" --all
  else
    log "no membench image archive at $membench_archive (hack/build-image.sh): the registry has no membench image"
  fi
  any_real_nodes || return 0
  real_node_tools
  local engine_build images archive image
  engine_build=$(dirname "$(readlink -f "$agent")")/membench-engine-build
  images=$("$root/hack/node-images.sh" "$(dirname "$("$root/hack/build-tools.sh" --print-bin-dir)")/node-images" "$engine_build") ||
    die "building the engine images for the registry failed (see above)"
  while read -r archive image; do
    [[ "$image" == registry.k8s.io/pause:* ]] && continue
    push_archive "$archive" "" "$(registry_name "$image")"
  done <<<"$images"
}

# registry_status: the registry's address (its process is among the components).
registry_status() {
  # shellcheck disable=SC1091
  source "$(registry_dir)/registry.env"
  echo "registry at https://$REGISTRY (user $REGISTRY_USER; address, user, password and CA in $(registry_dir)/registry.env)"
}
