#!/usr/bin/env bash
# Lays out the membench image's file system for one architecture: the binary, the shared
# libraries it needs (found through its ELF dynamic section, copied from this machine's Debian
# multiarch directories for the binary's architecture) and the bare minimum around them. No shell,
# no package manager, nothing else.
#
# usage: hack/image-rootfs.sh BINARY ROOTFS
#
# Both ways of building the image use it, so both produce the same layout:
#   - hack/build-image.sh, for amd64 and arm64 on an x86_64 machine (the arm64 libraries come from
#     Debian's libc6:arm64 and libgcc-s1:arm64, installed through multiarch by
#     hack/install-cross.sh);
#   - the Dockerfile's build stage, natively per platform under buildx.
#
# The layout:
#   /usr/local/bin/membench                 the entrypoint, without debug information
#   /lib/<triplet>/<library>                each library in the binary's closure (libc, libm,
#                                           libgcc_s, the loader), at Debian's paths
#   /lib64/ld-linux-x86-64.so.2 or          the program interpreter the binary names, a link to
#   /lib/ld-linux-aarch64.so.1                the loader as Debian has it
#   /usr/share/doc/<package>/copyright      the licences of the packages those libraries come from
#   /var/lib/dpkg/status.d/<package>        their dpkg records, so image scanners see the glibc version
#   /etc/passwd, /etc/group                 root, nonroot (65532) and nobody, none with a login shell
#   /tmp                                    world-writable, sticky
set -euo pipefail

log() { printf '[image-rootfs] %s\n' "$*" >&2; }
die() {
  log "$*"
  exit 1
}

[ $# -eq 2 ] || die "usage: hack/image-rootfs.sh BINARY ROOTFS"
binary=$1
rootfs=$2
[ -f "$binary" ] || die "no binary at $binary (build it first: cargo build --release)"
command -v readelf >/dev/null || die "readelf is missing (apt-get install binutils)"

machine=$(readelf -h "$binary" | sed -n 's/^ *Machine: *//p')
case "$machine" in
  *X86-64*) triplet=x86_64-linux-gnu dpkg_arch=amd64 ;;
  AArch64) triplet=aarch64-linux-gnu dpkg_arch=arm64 ;;
  *) die "$binary is built for '$machine'; the image holds amd64 and arm64 builds only" ;;
esac

needed_libraries() { readelf -d "$1" | sed -n 's/.*(NEEDED).*Shared library: \[\(.*\)\]/\1/p'; }
interpreter() { readelf -l "$1" | sed -n 's/.*Requesting program interpreter: \(.*\)\]/\1/p'; }

# A library as this machine has it for the binary's architecture (never the host's own when the
# binary is for another architecture: only the multiarch directories of its triplet are searched).
find_library() {
  local dir
  for dir in "/lib/$triplet" "/usr/lib/$triplet"; do
    if [ -e "$dir/$1" ]; then
      echo "$dir/$1"
      return
    fi
  done
  die "$1 ($dpkg_arch), needed by $binary, is not installed: run hack/install-cross.sh (apt-get install libc6:$dpkg_arch libgcc-s1:$dpkg_arch)"
}

rm -rf "$rootfs"
install -d -m 0755 "$rootfs"/{usr/local/bin,lib/$triplet,etc,var/lib/dpkg/status.d}
install -d -m 1777 "$rootfs/tmp"
# The release profile keeps line tables for backtraces (about 100 MB); the image carries symbols
# only. The build ID stays, so the unstripped binary in target/ still resolves an image's
# backtrace to lines.
strip=$triplet-strip
command -v "$strip" >/dev/null ||
  die "$strip is missing (apt-get install binutils-${triplet//_/-}; hack/install-cross.sh does)"
"$strip" --strip-debug -o "$rootfs/usr/local/bin/membench" "$binary"
chmod 0755 "$rootfs/usr/local/bin/membench"

# The closure of DT_NEEDED, breadth first from the binary.
declare -A copied=()
queue=("$binary")
while [ ${#queue[@]} -gt 0 ]; do
  object=${queue[0]}
  queue=("${queue[@]:1}")
  for library in $(needed_libraries "$object"); do
    [ -z "${copied[$library]:-}" ] || continue
    source=$(find_library "$library")
    copied[$library]=$source
    # Libraries are read-only data to the loader; the loader itself is also run as a program.
    mode=0644
    [[ "$library" == ld-linux* ]] && mode=0755
    install -m "$mode" "$(readlink -f "$source")" "$rootfs/lib/$triplet/$library"
    queue+=("$source")
  done
done

loader=$(interpreter "$binary")
[ -n "$loader" ] || die "$binary names no program interpreter (a static binary needs no loader, but this script expects Debian's dynamic build)"
loader_name=$(basename "$loader")
if [ -z "${copied[$loader_name]:-}" ]; then
  copied[$loader_name]=$(find_library "$loader_name")
  install -m 0755 "$(readlink -f "${copied[$loader_name]}")" "$rootfs/lib/$triplet/$loader_name"
fi
if [ "$loader" != "/lib/$triplet/$loader_name" ]; then
  install -d -m 0755 "$rootfs$(dirname "$loader")"
  ln -s "$(realpath -m --relative-to="$(dirname "$loader")" "/lib/$triplet/$loader_name")" "$rootfs$loader"
fi

# The packages the copied files come from: their licences and dpkg records go with them.
declare -A packages=()
# dpkg knows a file by the path its package ships it at, which a merged /usr may hide.
owning_package() {
  local path
  for path in "$1" "$(readlink -f "$1")"; do
    dpkg-query -S "$path" 2>/dev/null | head -1 | cut -d: -f1 && return
  done
  die "no Debian package owns $1"
}
for library in "${!copied[@]}"; do
  owner=$(owning_package "${copied[$library]}")
  packages[$owner]=1
done
for package in "${!packages[@]}"; do
  install -D -m 0644 "/usr/share/doc/$package/copyright" "$rootfs/usr/share/doc/$package/copyright"
  dpkg-query -s "$package:$dpkg_arch" >"$rootfs/var/lib/dpkg/status.d/$package"
  chmod 0644 "$rootfs/var/lib/dpkg/status.d/$package"
done

# The user the image runs as (65532, distroless's "nonroot"), and no login shell for anyone.
cat >"$rootfs/etc/passwd" <<'EOF'
root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:65532:65532:nonroot:/nonexistent:/sbin/nologin
EOF
cat >"$rootfs/etc/group" <<'EOF'
root:x:0:
nobody:x:65534:
nonroot:x:65532:
EOF
chmod 0644 "$rootfs/etc/passwd" "$rootfs/etc/group"

log "$dpkg_arch: $(cd "$rootfs" && find . -type f | wc -l) files, $(du -sh "$rootfs" | cut -f1): membench, ${!copied[*]} (from ${!packages[*]})"
