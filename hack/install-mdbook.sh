#!/usr/bin/env bash
# Installs mdBook, which builds the book in docs/ (docs/book.toml), from crates.io with cargo:
# a pinned version, --locked to its own Cargo.lock, into a cache kept between clones
# (~/.cache/membench/mdbook-<version>, or $MEMBENCH_MDBOOK_ROOT). Only the `search` feature is
# built: `serve` and `watch` bring a web server and a file watcher the suite never runs, and
# would double the build. Idempotent: when that version is there, it prints its path at once.
#
# usage: hack/install-mdbook.sh           install (a few minutes the first time), print the path
#        hack/install-mdbook.sh --print   print the path it installs to, install nothing
# operator/tests/docs_book.rs runs the binary this prints (hack/test.sh exports it as
# MEMBENCH_MDBOOK).
set -euo pipefail

version=0.5.4
root=${MEMBENCH_MDBOOK_ROOT:-$HOME/.cache/membench/mdbook-$version}
bin="$root/bin/mdbook"

log() { printf '[install-mdbook] %s\n' "$*" >&2; }

if [[ "${1:-}" == "--print" ]]; then
  echo "$bin"
  exit 0
fi

if [[ -x "$bin" ]] && "$bin" --version 2>/dev/null | grep -qx "mdbook v$version"; then
  echo "$bin"
  exit 0
fi

command -v cargo >/dev/null || {
  log "cargo is not on PATH: install Rust (rustup) first"
  exit 1
}
log "cargo install mdbook $version into $root (a few minutes the first time)"
cargo install --locked --version "$version" --no-default-features --features search \
  --root "$root" mdbook >&2
"$bin" --version >&2
echo "$bin"
