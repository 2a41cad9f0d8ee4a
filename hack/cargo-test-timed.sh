#!/usr/bin/env bash
# Runs `cargo test` with the arguments given and then says where the time went: one line per
# test binary (libtest's own "finished in" figure, the binary's wall time from cargo's output,
# and its counts), slowest first, and the total. The output is also kept in
# target/test-output.log. The exit code is cargo's.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mkdir -p target
log=target/test-output.log
# Each line of cargo's output with the seconds since the start, so that a binary's wall time
# (from its "Running" line to the next one) is known even when it fails or hangs.
: >"$log.timed"
cargo test "$@" 2>&1 | while IFS= read -r line; do
  printf '%s\n' "$line"
  printf '%s\t%s\n' "$EPOCHREALTIME" "$line" >>"$log.timed"
done
rc=${PIPESTATUS[0]}
mv -f "$log.timed" "$log" 2>/dev/null || true
echo
echo "hack/cargo-test-timed.sh: time per test binary (slowest first; wall seconds from cargo's 'Running' lines):"
awk -F'\t' -v OFS='\t' '
  NR == 1 { start = $1 }
  { $1 = $1 - start }
  function close_binary(at) {
    if (name != "") { printf "%8.1f s  %s  %s\n", at - began, name, result; }
    name = ""; result = "(no result line: it failed to start or was killed)";
  }
  $2 ~ /^ +(Running|Doc-tests) / {
    close_binary($1); began = $1; name = $2; sub(/^ +/, "", name);
  }
  $2 ~ /^test result: / { result = $2; sub(/^test result: /, "", result); }
  { last = $1 }
  END { close_binary(last); printf "%8.1f s  in all\n", last; }
' "$log" | sort -rn
exit "$rc"
