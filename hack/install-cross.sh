#!/usr/bin/env bash
# Installs what building membench for arm64 (Graviton), running that build here, and building and
# checking the two-architecture image need, on an x86_64 Debian 12 machine:
#   - the Rust target aarch64-unknown-linux-gnu (rustup);
#   - gcc-aarch64-linux-gnu and libc6-dev-arm64-cross: the cross C compiler and linker that
#     .cargo/config.toml names (ring compiles C and assembly for the target, then rustc links);
#   - qemu-user-static: runs arm64 programs on this x86 machine, one process at a time;
#   - Debian's arm64 libc6 and libgcc-s1, through multiarch (`dpkg --add-architecture arm64`):
#     the arm64 binary's runtime libraries where an arm64 Debian has them (/lib/ld-linux-aarch64.so.1,
#     /lib/aarch64-linux-gnu/), so qemu runs the binary without -L, and hack/build-image.sh
#     copies the same files into the image;
#   - skopeo: the tests read the image archive with it, as a registry client would.
# Idempotent: what is already there is skipped, so a second run takes a second.
set -euo pipefail

log() { printf '[install-cross] %s\n' "$*" >&2; }

if [ "$(uname -m)" != x86_64 ]; then
  log "this sets up an x86_64 host to build and run arm64 code; this host is $(uname -m)"
  exit 1
fi

target=aarch64-unknown-linux-gnu
if ! rustup target list --installed | grep -qx "$target"; then
  log "rustup target add $target"
  rustup target add "$target"
fi

# Other installs may hold the dpkg lock (several sessions share a machine): wait for it instead
# of failing.
apt_get() { DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 "$@"; }

added_arch=false
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  log "dpkg --add-architecture arm64"
  dpkg --add-architecture arm64
  added_arch=true
fi

installed() { dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null | grep -qx installed; }
apt_packages=()
for package in gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static skopeo \
  libc6:arm64 libgcc-s1:arm64; do
  installed "$package" || apt_packages+=("$package")
done
if [ ${#apt_packages[@]} -gt 0 ] || [ "$added_arch" = true ]; then
  # A new architecture needs its package lists, and an old list may name versions the mirror
  # no longer has.
  apt_get update -qq
fi
if [ ${#apt_packages[@]} -gt 0 ]; then
  log "apt-get install ${apt_packages[*]}"
  apt_get install -y -qq --no-install-recommends "${apt_packages[@]}" >/dev/null
fi

log "$(aarch64-linux-gnu-gcc --version | head -1); $(qemu-aarch64-static --version | head -1); skopeo $(skopeo --version | cut -d' ' -f3); arm64 libc6 $(dpkg-query -W -f='${Version}' libc6:arm64)"
