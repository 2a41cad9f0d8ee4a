#!/usr/bin/env bash
# Runs `cargo test` with the arguments given and then says where the time went: one line per
# test binary (its wall time from cargo's output and libtest's result line), slowest first, and
# the counts of them all in one line. The output is also kept in target/test-output.log, each
# line after the time it was printed. The exit code is cargo's.
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
# The counts of every binary in one closing line (also in target/test-totals.txt, which
# hack/test.sh prints again as its last line).
awk -F'\t' '
  $2 ~ /^test result: / {
    if (match($2, /[0-9]+ passed/)) passed += substr($2, RSTART, RLENGTH) + 0;
    if (match($2, /[0-9]+ failed/)) failed += substr($2, RSTART, RLENGTH) + 0;
    if (match($2, /[0-9]+ ignored/)) ignored += substr($2, RSTART, RLENGTH) + 0;
  }
  END { printf "tests: %d passed, %d failed, %d skipped\n", passed, failed, ignored }
' "$log" | tee target/test-totals.txt
exit "$rc"
