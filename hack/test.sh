#!/usr/bin/env bash
# Runs the whole test suite on a fresh machine: installs the engines and tools it needs
# (the engine store, Prometheus, Chromium for the HTML report's tests, mdBook for the book, the
# arm64 cross tools, Debian's runc and CNI plugins for the dev cluster's real nodes, and the dev cluster's
# Kubernetes binaries, kubelet, kubectl, containerd and helm built from Go modules, cached in
# ~/.cache/membench), builds membench for x86_64 and arm64 and its image, then runs every test
# of the workspace. The first run on a machine builds the control plane (about 10 minutes on 2
# cores, plus about 3 for the kubelet and containerd); later runs reuse it. Tests that need a
# real node (operator/tests/real_node_e2e.rs) add one to the dev cluster themselves.
#
# Every phase runs under a time limit, so CI cannot hang: when one passes, the phase is killed
# (with everything it started) and this script says which phase it was. The whole run is bounded
# by MEMBENCH_TEST_TIMEOUT seconds (default 5400, CI's 90 minutes); a phase never gets more than
# what is left of it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

total_limit=${MEMBENCH_TEST_TIMEOUT:-5400}
deadline=$((SECONDS + total_limit))

# A run from a fresh clone builds every test binary once: cargo's incremental caches would add
# about 6 GiB to target/ (and some build time) for nothing. A run left short of disk fails late,
# in the linker, so say so at the start. hack/dev-cluster.sh keeps this variable when it builds
# the node agent, so that build reuses this one.
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}
free_gib=$(($(df -k --output=avail . | tail -n 1) / 1024 / 1024))
if ((free_gib < 15)); then
  echo "hack/test.sh: WARNING: ${free_gib} GiB free on $(df --output=target . | tail -n 1);" \
    "a run from a fresh clone needs about 15 GiB (target/ about 8, the image, the dev cluster's" \
    "nodes). Free some (an old clone's target/, for one) if the build fails with" \
    "'No space left on device'." >&2
fi

# phase NAME SECONDS COMMAND...: runs COMMAND with at most SECONDS (or what is left of the whole
# run), SIGTERM then SIGKILL 30 seconds later to its whole process group.
phase() {
  local name=$1 limit=$2
  shift 2
  local left=$((deadline - SECONDS)) bound="phase limit"
  if ((left < limit)); then
    limit=$left
    bound="what was left of the run's ${total_limit}s (MEMBENCH_TEST_TIMEOUT)"
  fi
  if ((limit <= 0)); then
    echo "hack/test.sh: no time left for phase '$name' (MEMBENCH_TEST_TIMEOUT=${total_limit}s)" >&2
    exit 124
  fi
  echo "hack/test.sh: phase '$name' (at most ${limit}s)" >&2
  local started=$SECONDS rc=0
  # timeout runs in a process group of its own (so that it can kill everything the phase
  # started), out of reach of the terminal's Ctrl-C: run it in the background and pass an
  # interrupt on to that whole group.
  timeout --kill-after=30 "$limit" "$@" &
  local pid=$!
  # A phase still running at three quarters of its limit says so while it runs (the log shows
  # which phase is close to failing CI before it does).
  local warn_at=$((limit * 3 / 4))
  (
    trap 'kill "$nap" 2>/dev/null; exit 0' TERM
    sleep "$warn_at" >/dev/null 2>&1 </dev/null &
    nap=$!
    wait "$nap" && echo "hack/test.sh: WARNING: phase '$name' still running after ${warn_at}s," \
      "three quarters of its ${limit}s limit" >&2
  ) &
  local watchdog=$!
  interrupted=false
  trap 'interrupted=true; kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null' INT TERM
  # A trapped signal ends `wait` early: wait again until the phase has really ended.
  while true; do
    rc=0
    wait "$pid" || rc=$?
    kill -0 "$pid" 2>/dev/null || break
  done
  trap - INT TERM
  kill "$watchdog" 2>/dev/null || true
  wait "$watchdog" 2>/dev/null || true
  if $interrupted; then
    echo "hack/test.sh: interrupted during phase '$name'" >&2
    exit 130
  fi
  if ((rc == 124 || rc == 137)); then
    phase_times+=("$(printf '%6ds  %s (timed out)' "$((SECONDS - started))" "$name")")
    echo "hack/test.sh: phase '$name' TIMED OUT after ${limit}s ($bound): $*" >&2
    exit 124
  fi
  if ((rc != 0)); then
    phase_times+=("$(printf '%6ds  %s (failed, exit %s)' "$((SECONDS - started))" "$name" "$rc")")
    echo "hack/test.sh: phase '$name' failed (exit $rc) after $((SECONDS - started))s;" \
      "free disk: $(free_disk)" >&2
    exit "$rc"
  fi
  local took=$((SECONDS - started))
  echo "hack/test.sh: phase '$name' done in ${took}s; free disk: $(free_disk)" >&2
  if ((took * 4 >= limit * 3)); then
    echo "hack/test.sh: WARNING: phase '$name' took ${took}s, over three quarters of its ${limit}s limit" >&2
  fi
  phase_times+=("$(printf '%6ds  %s' "$took" "$name")")
}
phase_times=()
trap report_phase_times EXIT
# The time of every phase, at the end of the run (failed or not).
report_phase_times() {
  ((${#phase_times[@]} > 0)) || return 0
  echo "hack/test.sh: phase times (the whole run ${SECONDS}s of ${total_limit}s):" >&2
  printf '  %s\n' "${phase_times[@]}" >&2
  # The tests' counts stay the run's last line.
  if [[ -e target/test-output.log.started && -s target/test-totals.txt && target/test-totals.txt -nt target/test-output.log.started ]]; then
    cat target/test-totals.txt
  fi
}

# free_disk: what is left on the file system of the checkout, where the builds and the dev
# cluster's nodes write (a real node's kubelet evicts pods when it runs out).
free_disk() {
  df -h --output=avail . | tail -n 1 | tr -d ' '
}

# The engine store, with its arm64 builds under qemu-user on x86_64 (install-engines.sh installs
# qemu-user-static and adds dpkg's arm64 architecture itself, so the order of these two does not
# matter on a fresh machine).
phase install-engines 900 hack/install-engines.sh
# Debian's Chromium, for the HTML report's tests.
phase install-chromium 900 hack/install-chromium.sh
# The arm64 cross toolchain, qemu-user and skopeo (for the arm64 build and the image tests).
phase install-cross 900 hack/install-cross.sh
# runc and the CNI plugins of the dev cluster's real nodes.
phase install-node-runtime 900 hack/install-node-runtime.sh
# mdBook, for the book in docs/ (operator/tests/docs_book.rs builds it and checks its links).
phase install-mdbook 1200 hack/install-mdbook.sh
export MEMBENCH_MDBOOK
MEMBENCH_MDBOOK=$(hack/install-mdbook.sh --print)
# A cold build of the control plane, kubectl, etcd and helm takes about 10 minutes on 2 cores;
# the kubelet about one more, containerd and its shim about two.
phase build-tools 2400 hack/build-tools.sh

# The tests run the kubectl built above (the control plane's own version), never one that
# happens to be on PATH.
bin_dir=$(hack/build-tools.sh --print-bin-dir)
# shellcheck source=hack/tool-versions.env
source hack/tool-versions.env
export MEMBENCH_KUBECTL="$bin_dir/kubernetes-$KUBERNETES_VERSION/kubectl"
[[ -x "$MEMBENCH_KUBECTL" ]] || {
  echo "hack/test.sh: hack/build-tools.sh left no kubectl at $MEMBENCH_KUBECTL" >&2
  exit 1
}

# membench for arm64 and the two-architecture image (release builds for x86_64 and aarch64, a few
# minutes each); arm64_client.rs and image.rs test what this writes.
phase build-image 2400 hack/build-image.sh

# Tests that need the dev cluster start it through hack/dev-cluster.sh, and it is stopped
# afterwards. A cluster already up is taken down first: its real nodes keep what earlier tests
# left on them, such as the kubelet's records of images pulled with a pull Secret
# (real_node_registry's mirror copy of redis:8.2.3 shares its image with the preloaded one, and
# the kubelet then re-verifies that image for every other pod by pulling it from Docker Hub:
# seen 2026-12-05, seven real-node tests failed in a run that reused an earlier run's cluster).
if timeout 60 hack/dev-cluster.sh status >/dev/null 2>&1; then
  echo "hack/test.sh: the dev cluster is up; taking it down so that this run starts its own" >&2
  timeout --kill-after=10 120 hack/dev-cluster.sh down >/dev/null 2>&1 || {
    echo "hack/test.sh: 'hack/dev-cluster.sh down' failed or timed out; stop it and run again" >&2
    exit 1
  }
fi
cleanup() {
  report_phase_times
  timeout --kill-after=10 120 hack/dev-cluster.sh down >/dev/null 2>&1 ||
    echo "hack/test.sh: 'hack/dev-cluster.sh down' failed or timed out" >&2
}
trap cleanup EXIT

phase cargo-build 1800 cargo build --workspace --bins
# The performance harness: built here so it cannot rot, never run. In the dev profile: the bench
# profile would build every dependency a second time, optimized (about 110 s), to check only that
# the harness compiles; the dev profile shares the dependencies the tests build next.
phase cargo-build-benches 1800 cargo build --workspace --benches --profile dev
# hack/cargo-test-timed.sh is `cargo test` that ends with the time of each test binary.
touch target/test-output.log.started
phase cargo-test 3600 hack/cargo-test-timed.sh --workspace --no-fail-fast "$@"
