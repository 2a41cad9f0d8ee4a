#!/usr/bin/env bash
# Builds the images the dev cluster's real nodes (hack/dev-cluster.sh, `:kubelet` pools) import
# into their containerd, since no registry is reachable here (as an air-gapped cluster preloads
# its images). Each is a one-layer linux/amd64 OCI archive, written without a container runtime
# (hack/lib-oci.sh), cached in DIR under a name that changes with what it was built from:
#
#   - registry.k8s.io/pause:3.10.1, the pod sandbox: hack/build-tools.sh's static pause program
#     as /pause, user 65535;
#   - one engine image per name the operator runs (`redis:<v>`, `valkey/valkey:<v>`,
#     `docker.dragonflydb.io/dragonflydb/dragonfly:v<v>`), for every version the engine store
#     has an x86_64 build of, or only the images named in MEMBENCH_REAL_NODE_ENGINE_IMAGES
#     (space separated). The build inside is the one the node agent runs for the same name
#     (`membench-engine-build`), so a real node and a fake node run the same server for a tag:
#     the server at /usr/local/bin/<server> with the shared libraries it loads (found by ldd, at
#     this machine's paths), Debian's jemalloc preloaded (LD_PRELOAD in the image's Env) where
#     the store build has libc malloc, as the node agent does, since the official images have
#     jemalloc; user 999 (`redis`, `valkey`, `dfly`, as in the official images), working
#     directory /data.
#
# Where ours differ from the official images: no shell and no entrypoint script. The
# entrypoint is the server itself, so a pod's `args` (the operator passes only flags) go to it,
# as the official script does with arguments that start with `-`; `args` naming another program
# (`redis-cli ...`) do not run it. The image does not step down from root (it starts as 999;
# the operator's pods set runAsUser 999 anyway), ships no redis-cli, and has no /usr/local/etc
# config file: the server's defaults, as the official images start it.
#
# usage: hack/node-images.sh DIR ENGINE_BUILD_BIN
#   ENGINE_BUILD_BIN: the membench-engine-build binary (devcluster/src/bin), which names the
#   store build an image stands for.
# Prints one line per image: "<archive path> <image name>".
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/lib-oci.sh
source "$here/lib-oci.sh"

log() { printf '[node-images] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

[[ $# -eq 2 ]] || die "usage: hack/node-images.sh DIR ENGINE_BUILD_BIN"
dir=$1
engine_build=$2
[[ -x "$engine_build" ]] || die "no membench-engine-build at $engine_build (cargo build --workspace --bins)"
bin_dir=$("$here/build-tools.sh" --print-bin-dir)
mkdir -p "$dir"
# Fixed times, so the same files give the same digests.
epoch=0
created=1970-01-01T00:00:00Z

# write_archive ROOTFS OUTPUT NAME CONFIG: a one-layer linux/amd64 OCI archive of ROOTFS named
# NAME (`docker.io/library/redis:8.2.3`), whose image config's `config` object is CONFIG.
write_archive() {
  local rootfs=$1 output=$2 name=$3 config=$4 work
  work=$(mktemp -d "$dir/.build.XXXXXX")
  local layout=$work/layout
  mkdir -p "$layout/blobs/sha256"
  # An uncompressed layer: the archive never leaves this machine, and gzip would cost more
  # than it saves here.
  oci_reproducible_tar "$rootfs" "$work/layer.tar" "$epoch"
  local diff_id layer_digest layer_size config_digest config_size manifest_digest manifest_size
  diff_id=sha256:$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
  read -r layer_digest layer_size < <(oci_add_blob "$layout" "$work/layer.tar")
  printf '%s' '{"created":"'"$created"'","architecture":"amd64","os":"linux","config":'"$config"',' \
    '"rootfs":{"type":"layers","diff_ids":["'"$diff_id"'"]},' \
    '"history":[{"created":"'"$created"'","created_by":"hack/node-images.sh"}]}' >"$work/config.json"
  read -r config_digest config_size < <(oci_add_blob "$layout" "$work/config.json")
  printf '%s' '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",' \
    '"config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"'"$config_digest"'","size":'"$config_size"'},' \
    '"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"'"$layer_digest"'","size":'"$layer_size"'}]}' \
    >"$work/manifest.json"
  read -r manifest_digest manifest_size < <(oci_add_blob "$layout" "$work/manifest.json")
  printf '%s' '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[' \
    '{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"'"$manifest_digest"'","size":'"$manifest_size"',' \
    '"platform":{"architecture":"amd64","os":"linux"},' \
    '"annotations":{"io.containerd.image.name":"'"$name"'","org.opencontainers.image.ref.name":"'"${name##*:}"'"}}]}' \
    >"$layout/index.json"
  printf '%s' '{"imageLayoutVersion":"1.0.0"}' >"$layout/oci-layout"
  oci_reproducible_tar "$layout" "$output.partial" "$epoch"
  mv "$output.partial" "$output"
  rm -rf "$work"
}

# passwd_files ROOTFS USER: /etc/passwd and /etc/group with root, USER (999) and nobody, none
# with a login shell (there is no shell).
passwd_files() {
  mkdir -p "$1/etc"
  printf 'root:x:0:0:root:/root:/sbin/nologin\n%s:x:999:999::/data:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n' "$2" >"$1/etc/passwd"
  printf 'root:x:0:\n%s:x:999:\nnogroup:x:65534:\n' "$2" >"$1/etc/group"
}

# copy_with_libraries ROOTFS FILE: FILE's shared libraries (and the loader), as ldd resolves
# them on this machine, copied to the same paths in ROOTFS.
copy_with_libraries() {
  local rootfs=$1 file=$2 lib
  while read -r lib; do
    [[ -n "$lib" ]] || continue
    mkdir -p "$rootfs$(dirname "$lib")"
    cp -L "$lib" "$rootfs$lib"
  done < <(ldd "$file" 2>/dev/null | sed -n -e 's/.*=> \(\/[^ ]*\) (.*/\1/p' -e 's/^\s*\(\/[^ ]*\) (.*/\1/p')
}

build_pause() {
  local pause=$bin_dir/pause/pause name=registry.k8s.io/pause:3.10.1
  [[ -x "$pause" ]] || die "no pause program at $pause: run hack/build-tools.sh containerd"
  local key output
  key=$(stat -c '%s %Y' "$pause" | sha256sum | cut -c1-12)
  output=$dir/pause-3.10.1-$key.tar
  if [[ ! -f "$output" ]]; then
    local rootfs
    rootfs=$(mktemp -d "$dir/.rootfs.XXXXXX")
    cp "$pause" "$rootfs/pause"
    write_archive "$rootfs" "$output" "$name" '{"User":"65535:65535","Entrypoint":["/pause"],"WorkingDir":"/"}'
    rm -rf "$rootfs"
  fi
  echo "$output $name"
}

# full_name IMAGE: the reference a runtime stores (`redis:8.2.3` is docker.io/library/redis:8.2.3).
full_name() {
  local image=$1 first=${1%%/*}
  if [[ "$image" != */* ]]; then
    echo "docker.io/library/$image"
  elif [[ "$first" == *.* || "$first" == *:* || "$first" == localhost ]]; then
    echo "$image"
  else
    echo "docker.io/$image"
  fi
}

build_engine() {
  local image=$1 described server build path preload
  described=$("$engine_build" "$image" --arch amd64) || die "no engine store build for $image (see above)"
  server=$(sed -n 's/^server=//p' <<<"$described")
  build=$(sed -n 's/^build=//p' <<<"$described")
  path=$(sed -n 's/^path=//p' <<<"$described")
  preload=$(sed -n 's/^preload=//p' <<<"$described")
  local user
  case "$server" in
    redis-server) user=redis ;;
    valkey-server) user=valkey ;;
    dragonfly) user=dfly ;;
    *) die "$image: unexpected server $server" ;;
  esac
  local name key output
  name=$(full_name "$image")
  key=$({ echo "$build $preload"; stat -c '%s %Y' "$path" ${preload:+"$preload"}; } | sha256sum | cut -c1-12)
  output=$dir/$(tr '/:' '__' <<<"$name")-$key.tar
  if [[ ! -f "$output" ]]; then
    log "$name: the engine store's $build${preload:+ with $preload preloaded}"
    local rootfs
    rootfs=$(mktemp -d "$dir/.rootfs.XXXXXX")
    mkdir -p "$rootfs/usr/local/bin" "$rootfs/data" "$rootfs/tmp"
    chmod 1777 "$rootfs/tmp"
    cp -L "$path" "$rootfs/usr/local/bin/$server"
    copy_with_libraries "$rootfs" "$path"
    local env='"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"'
    if [[ -n "$preload" ]]; then
      mkdir -p "$rootfs$(dirname "$preload")"
      cp -L "$preload" "$rootfs$preload"
      copy_with_libraries "$rootfs" "$preload"
      env+=',"LD_PRELOAD='"$preload"'"'
    fi
    passwd_files "$rootfs" "$user"
    write_archive "$rootfs" "$output" "$name" \
      '{"User":"999:999","Entrypoint":["/usr/local/bin/'"$server"'"],"Env":['"$env"'],"WorkingDir":"/data","Labels":{"io.membench.engine-store.build":"'"$build"'"}}'
    rm -rf "$rootfs"
  fi
  echo "$output $name"
}

build_pause
if [[ -n "${MEMBENCH_REAL_NODE_ENGINE_IMAGES:-}" ]]; then
  read -ra images <<<"$MEMBENCH_REAL_NODE_ENGINE_IMAGES"
else
  mapfile -t images < <("$engine_build" --list --arch amd64)
fi
for image in "${images[@]}"; do build_engine "$image"; done
