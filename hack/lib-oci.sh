# shellcheck shell=bash
# Writing OCI image layouts with coreutils, tar and gzip, for the scripts that build images
# without a container runtime: hack/build-image.sh (the membench image) and hack/node-images.sh
# (the dev cluster's real nodes' pause and engine images). Sourced, not run.
#
# oci_add_blob LAYOUT FILE: moves FILE into LAYOUT's blobs under its digest; prints
# "sha256:<hex> <size>".
oci_add_blob() {
  local hex size
  hex=$(sha256sum "$2" | cut -d' ' -f1)
  size=$(stat -c %s "$2")
  mkdir -p "$1/blobs/sha256"
  mv "$2" "$1/blobs/sha256/$hex"
  echo "sha256:$hex $size"
}

# oci_reproducible_tar DIR OUTPUT EPOCH: every entry of DIR sorted by name, owned by root,
# dated EPOCH (seconds), so the same files give the same digest.
oci_reproducible_tar() {
  local entries
  entries=$(mktemp)
  (cd "$1" && find . -mindepth 1 -printf '%P\n' | LC_ALL=C sort) >"$entries"
  tar --create --file "$2" --directory "$1" --no-recursion --verbatim-files-from \
    --files-from "$entries" --owner=0 --group=0 --numeric-owner --mtime="@$3" \
    --format=posix --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime
  rm -f "$entries"
}
