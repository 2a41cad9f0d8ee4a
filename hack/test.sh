#!/usr/bin/env bash
# Runs the whole test suite on a fresh machine: installs the engines and tools it needs
# (Redis and Valkey, Prometheus, Chromium for the HTML report's tests, and the dev cluster's
# Kubernetes binaries and helm built from Go modules, cached in ~/.cache/membench), then every
# test of the workspace. The first run on a machine builds the control plane (about 15-30
# minutes); later runs reuse it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

hack/install-engines.sh
hack/install-chromium.sh
hack/build-tools.sh

# Tests that need the dev cluster start it through hack/dev-cluster.sh; stop it afterwards
# unless it was already up before the tests.
cluster_was_up=false
if [ -x hack/dev-cluster.sh ] && hack/dev-cluster.sh status >/dev/null 2>&1; then
  cluster_was_up=true
fi
cleanup() {
  if [ "$cluster_was_up" = false ] && [ -x hack/dev-cluster.sh ]; then
    hack/dev-cluster.sh down >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT

cargo build --workspace --bins
cargo test --workspace --no-fail-fast "$@"
