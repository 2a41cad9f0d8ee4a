#!/usr/bin/env bash
# Instructions per command of membench's load loop and of redis-benchmark, as callgrind counts
# them: user-space instructions (the client's own code and the C library; the kernel's work is
# not counted), SETs of 16-byte values over a 1,000,000-key space against Debian's Redis.
#
# Each client runs twice, with $SMALL and $LARGE commands; the difference divided by
# ($LARGE - $SMALL) is the cost of one more command, without process start, connection and
# report. "own code" leaves out the C library and the dynamic loader.
#
#   hack/client-profile.sh            # depths 1 and 16
#   hack/client-profile.sh 1 16 100   # other depths
#
# Needs valgrind (apt-get install valgrind), redis-server and redis-benchmark (redis-server,
# redis-tools) and the release membench (cargo build --release -p membench). About a minute.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
membench="${MEMBENCH_BIN:-$root/target/release/membench}"
SMALL="${SMALL:-20000}"
LARGE="${LARGE:-120000}"
depths=("$@")
[ ${#depths[@]} -gt 0 ] || depths=(1 16)

for tool in valgrind callgrind_annotate redis-server redis-benchmark redis-cli; do
  command -v "$tool" >/dev/null || {
    echo "hack/client-profile.sh: $tool is missing (apt-get install valgrind redis-server redis-tools)" >&2
    exit 1
  }
done
[ -x "$membench" ] || {
  echo "hack/client-profile.sh: no release membench at $membench (cargo build --release -p membench)" >&2
  exit 1
}

work="$(mktemp -d)"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
redis-server --port "$port" --save '' --appendonly no --daemonize yes \
  --dir "$work" --logfile "$work/redis.log" --pidfile "$work/redis.pid"
cleanup() {
  redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq 50); do
  redis-cli -p "$port" ping >/dev/null 2>&1 && break
  sleep 0.1
done

# Total instructions, and those outside the C library and the loader, of one callgrind run.
count() {
  callgrind_annotate --threshold=100 "$1" 2>/dev/null | awk '
    /PROGRAM TOTALS/ { gsub(",", "", $1); total = $1 }
    /^ *[0-9,]+ \( *[0-9.]+%\)  / && !/PROGRAM TOTALS/ {
      n = $1; gsub(",", "", n)
      if ($0 ~ /\[[^]]*(libc\.so|ld-linux)[^]]*\]$/) lib += n
    }
    END { printf "%d %d\n", total, total - lib }'
}

# callgrind of one client run with N commands at DEPTH: prints "total own".
profile() {
  local client=$1 depth=$2 n=$3 out="$work/cg.$1.$2.$3"
  redis-cli -p "$port" flushall >/dev/null
  case "$client" in
  membench)
    valgrind --tool=callgrind --callgrind-out-file="$out" "$membench" load \
      --addr "127.0.0.1:$port" --repetitions 1 --output json --workload random-strings \
      --requests "$n" --keyspace 1000000 --value-size 16 --pipeline "$depth" \
      --batches-in-flight 1 >/dev/null 2>"$work/err" || { cat "$work/err" >&2; exit 1; }
    ;;
  redis-benchmark)
    valgrind --tool=callgrind --callgrind-out-file="$out" redis-benchmark -p "$port" \
      -c 1 -P "$depth" -n "$n" -t set -r 1000000 -d 16 --csv >/dev/null 2>"$work/err" ||
      { cat "$work/err" >&2; exit 1; }
    ;;
  esac
  count "$out"
}

echo "instructions per command (callgrind, user space), SET 16-byte values, Redis $(redis-server --version | sed -n 's/.*v=\([^ ]*\).*/\1/p')"
echo "marginal cost: runs of $SMALL and $LARGE commands, difference / $((LARGE - SMALL))"
printf '%-16s %6s %12s %12s\n' client depth "all user" "own code"
for depth in "${depths[@]}"; do
  for client in membench redis-benchmark; do
    read -r small_total small_own < <(profile "$client" "$depth" "$SMALL")
    read -r large_total large_own < <(profile "$client" "$depth" "$LARGE")
    printf '%-16s %6s %12d %12d\n' "$client" "$depth" \
      $(((large_total - small_total) / (LARGE - SMALL))) \
      $(((large_own - small_own) / (LARGE - SMALL)))
  done
done
