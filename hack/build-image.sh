#!/usr/bin/env bash
# Builds the membench image for linux/amd64 and linux/arm64 without a container runtime, and
# writes it as an OCI archive (an OCI image layout in a tar) to target/image/membench-oci.tar
# (under $CARGO_TARGET_DIR when that is set):
#
#   1. `cargo build --release` for this machine (x86_64) and for aarch64-unknown-linux-gnu (the
#      cross linker comes from .cargo/config.toml; hack/install-cross.sh installs it), in a
#      target directory kept between clones ($MEMBENCH_RELEASE_TARGET_DIR, default
#      ~/.cache/membench/release-target), the binaries then copied to target/;
#   2. each binary's file system by hack/image-rootfs.sh, the same script the Dockerfile runs:
#      /usr/local/bin/membench and its runtime libraries, user 65532, no shell;
#   3. per architecture one layer (a reproducible tar.gz), one config (entrypoint, user,
#      platform) and one manifest, then an image index naming both platforms.
#
# The OCI format is tar, JSON and sha256, so this writes it directly with coreutils, tar and
# gzip instead of asking umoci to (umoci 0.4.7, Debian 12's, edits one image manifest at a time
# and has no command for a multi-platform index; it would need this same hand-written JSON on
# top). File times are the last commit's time and owners are root, so the same sources and
# binaries give the same digests.
#
# usage: hack/build-image.sh          (CI runs it; prints the index digest when done)
# Push it with skopeo, for example:
#   skopeo copy --all oci-archive:target/image/membench-oci.tar docker://<registry>/membench:0.1.0
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { printf '[build-image] %s\n' "$*" >&2; }
die() {
  log "$*"
  exit 1
}

[ "$(uname -m)" = x86_64 ] ||
  die "builds the amd64 half natively and the arm64 half with the cross linker, so it runs on x86_64 only (this is $(uname -m)); elsewhere use the Dockerfile with buildx"
command -v aarch64-linux-gnu-gcc >/dev/null || die "no cross linker: run hack/install-cross.sh"

target_dir=${CARGO_TARGET_DIR:-target}
# The release builds have their own target directory, kept between clones like the tools
# (hack/build-tools.sh): a fresh clone then compiles only the workspace's own crates, not every
# dependency twice over (about 10 of a cold build's 15 minutes here). Cargo's fingerprints decide
# what is rebuilt, and its lock serializes clones that build at once. The two binaries are then
# copied to where a build in this clone would have put them, which is where the tests look.
release_target=${MEMBENCH_RELEASE_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/membench/release-target}
log "cargo build --release (x86_64 and aarch64) in $release_target"
CARGO_TARGET_DIR=$release_target cargo build --release --locked -p membench --bin membench
CARGO_TARGET_DIR=$release_target cargo build --release --locked -p membench --bin membench --target aarch64-unknown-linux-gnu
for built in release/membench aarch64-unknown-linux-gnu/release/membench; do
  mkdir -p "$(dirname "$target_dir/$built")"
  cp -- "$release_target/$built" "$target_dir/$built.partial"
  mv "$target_dir/$built.partial" "$target_dir/$built"
done

version=$("$target_dir/release/membench" --version | cut -d' ' -f2)
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)

out=$target_dir/image
work=$out/build
layout=$work/layout
rm -rf "$work"
mkdir -p "$layout/blobs/sha256"

# shellcheck source=hack/lib-oci.sh
source hack/lib-oci.sh
add_blob() { oci_add_blob "$layout" "$1"; }
reproducible_tar() { oci_reproducible_tar "$1" "$2" "$epoch"; }

manifests=()
for platform in amd64:"$target_dir/release/membench" arm64:"$target_dir/aarch64-unknown-linux-gnu/release/membench"; do
  arch=${platform%%:*}
  binary=${platform#*:}
  variant_field=""
  [ "$arch" = arm64 ] && variant_field=',"variant":"v8"'

  rootfs=$work/rootfs-$arch
  hack/image-rootfs.sh "$binary" "$rootfs"
  reproducible_tar "$rootfs" "$work/layer.tar"
  diff_id=sha256:$(sha256sum "$work/layer.tar" | cut -d' ' -f1)
  gzip -n -9 "$work/layer.tar"
  read -r layer_digest layer_size < <(add_blob "$work/layer.tar.gz")

  printf '%s' \
    '{"created":"'"$created"'","architecture":"'"$arch"'"'"$variant_field"',"os":"linux",' \
    '"config":{"User":"65532:65532","Entrypoint":["/usr/local/bin/membench"],' \
    '"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"WorkingDir":"/",' \
    '"Labels":{"org.opencontainers.image.title":"membench",' \
    '"org.opencontainers.image.version":"'"$version"'",' \
    '"org.opencontainers.image.revision":"'"$revision"'",' \
    '"org.opencontainers.image.licenses":"Apache-2.0"}},' \
    '"rootfs":{"type":"layers","diff_ids":["'"$diff_id"'"]},' \
    '"history":[{"created":"'"$created"'","created_by":"hack/build-image.sh"}]}' \
    >"$work/config.json"
  read -r config_digest config_size < <(add_blob "$work/config.json")

  printf '%s' \
    '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json",' \
    '"config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"'"$config_digest"'","size":'"$config_size"'},' \
    '"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"'"$layer_digest"'","size":'"$layer_size"'}]}' \
    >"$work/manifest.json"
  read -r manifest_digest manifest_size < <(add_blob "$work/manifest.json")

  manifests+=('{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"'"$manifest_digest"'","size":'"$manifest_size"',"platform":{"architecture":"'"$arch"'","os":"linux"'"$variant_field"'}}')
  log "linux/$arch: manifest $manifest_digest, layer $((layer_size / 1024 / 1024)) MiB compressed"
done

# The image index (both platforms) is a blob of its own; the layout's index.json points at it
# under the version as its tag, as a registry would hold it.
joined=$(
  IFS=,
  echo "${manifests[*]}"
)
printf '%s' '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":['"$joined"']}' \
  >"$work/index.json"
read -r index_digest index_size < <(add_blob "$work/index.json")
printf '%s' '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[' \
  '{"mediaType":"application/vnd.oci.image.index.v1+json","digest":"'"$index_digest"'","size":'"$index_size"',' \
  '"annotations":{"org.opencontainers.image.ref.name":"'"$version"'"}}]}' >"$layout/index.json"
printf '%s' '{"imageLayoutVersion":"1.0.0"}' >"$layout/oci-layout"

reproducible_tar "$layout" "$out/membench-oci.tar.partial"
mv "$out/membench-oci.tar.partial" "$out/membench-oci.tar"
rm -rf "$work"
log "$out/membench-oci.tar: index $index_digest (linux/amd64, linux/arm64), tag $version"
