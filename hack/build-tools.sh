#!/usr/bin/env bash
# Builds the dev cluster's tools from Go modules, since no prebuilt Kubernetes binary can be
# downloaded here: kube-apiserver, kube-scheduler, kube-controller-manager, kubectl and kubelet
# (k8s.io/kubernetes, so kubectl and the real nodes' kubelet are exactly the control plane's
# version), etcd (go.etcd.io/etcd/server/v3), helm (helm.sh/helm/v3), actionlint
# (github.com/rhysd/actionlint, which checks .github/workflows in the suite), for the real nodes
# containerd with its runc shim and ctr (github.com/containerd/containerd/v2), and the dev
# cluster's image registry (CNCF distribution, github.com/distribution/distribution/v3). Each tool gets
# its own Go module so their dependency versions never mix. Binaries are cached outside the repo
# and a tool that is already built is skipped, so only the first run on a machine is slow
# (20-40 minutes; the kubelet adds about a minute, containerd about two).
#
# usage: hack/build-tools.sh [kubernetes|etcd|helm|containerd|actionlint|registry]...   (no argument: all)
#        hack/build-tools.sh --print-bin-dir                          (where the binaries live)
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=hack/tool-versions.env
source "$here/tool-versions.env"

cache=${MEMBENCH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/membench}
bin_dir="$cache/bin"
src_dir="$cache/src"

if [[ "${1:-}" == "--print-bin-dir" ]]; then
  echo "$bin_dir"
  exit 0
fi

export GOFLAGS=-mod=mod
export CGO_ENABLED=0

log() { printf '[build-tools] %s\n' "$*" >&2; }

# go_tools_module DIR MODULE VERSION PACKAGE...: writes a module in DIR that requires MODULE and
# blank-imports each PACKAGE behind the `tools` build tag, so `go mod tidy` records them.
go_tools_module() {
  local dir=$1 module=$2 version=$3
  shift 3
  mkdir -p "$dir"
  {
    echo "module membench.io/tools/$(basename "$dir")"
    echo
    echo "go 1.26.0"
    echo
    echo "require $module $version"
  } >"$dir/go.mod"
  {
    echo "//go:build tools"
    echo
    echo "package tools"
    echo
    echo "import ("
    local pkg
    for pkg in "$@"; do echo "	_ \"$pkg\""; done
    echo ")"
  } >"$dir/tools.go"
}

# missing_commands OUT CMD...: the commands of CMD... not yet built in OUT.
missing_commands() {
  local out=$1 c
  shift
  for c in "$@"; do [[ -x "$out/$c" ]] || echo "$c"; done
}

# go_build_commands DIR OUT TAGS LDFLAGS PACKAGE_PREFIX CMD...: builds each PACKAGE_PREFIX/CMD in
# the module DIR into OUT/CMD (through a .tmp file, so an interrupted build leaves nothing).
go_build_commands() {
  local dir=$1 out=$2 tags=$3 ldflags=$4 prefix=$5 c
  shift 5
  mkdir -p "$out"
  for c in "$@"; do
    log "building $c (slow the first time)"
    (cd "$dir" && go build -trimpath -tags "$tags" -ldflags "$ldflags" -o "$out/$c.tmp" "$prefix/$c")
    mv "$out/$c.tmp" "$out/$c"
  done
}

build_kubernetes() {
  local v=$KUBERNETES_VERSION out="$bin_dir/kubernetes-$KUBERNETES_VERSION"
  # kubelet: the real nodes of the dev cluster (hack/dev-cluster.sh, `:kubelet` pools).
  local cmds=(kube-apiserver kube-scheduler kube-controller-manager kubectl kubelet)
  local missing c
  mapfile -t missing < <(missing_commands "$out" "${cmds[@]}")
  if [[ ${#missing[@]} -eq 0 ]]; then
    log "kubernetes $v already built in $out"
    return
  fi
  local dir="$src_dir/kubernetes-$v"
  local pkgs=()
  for c in "${cmds[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  go_tools_module "$dir" k8s.io/kubernetes "$v" "${pkgs[@]}"
  # k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with local
  # directories; we replace each with its published release instead. The list comes from the
  # release's own go.mod, so modules added in a release (k8s.io/streaming in 1.36) are never missed.
  local mod_file
  mod_file=$(cd "$dir" && go mod download -json "k8s.io/kubernetes@$v" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  local staging_version="v0.${v#v1.}"
  {
    echo
    echo "replace ("
    sed -n 's#^\s*\(k8s\.io/[a-z0-9-]*\) => \./staging/.*#\1#p' "$mod_file" | sort -u | while read -r m; do
      echo "	$m => $m $staging_version"
    done
    echo ")"
  } >>"$dir/go.mod"
  log "resolving k8s.io/kubernetes $v (staging modules at $staging_version)"
  (cd "$dir" && go mod tidy)
  local major=${v#v}; major=${major%%.*}
  local minor=${v#v*.}; minor=${minor%%.*}
  local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$v -X k8s.io/component-base/version.gitMajor=$major -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
  go_build_commands "$dir" "$out" selinux,notest,grpcnotrace "$ldflags" k8s.io/kubernetes/cmd "${missing[@]}"
}

build_etcd() {
  local v=$ETCD_VERSION out="$bin_dir/etcd-$ETCD_VERSION"
  if [[ -x "$out/etcd" ]]; then
    log "etcd $v already built in $out"
    return
  fi
  local dir="$src_dir/etcd-$v"
  go_tools_module "$dir" go.etcd.io/etcd/server/v3 "$v" go.etcd.io/etcd/server/v3
  log "building etcd $v"
  (cd "$dir" && go mod tidy && mkdir -p "$out" && go build -trimpath -ldflags "-s -w" -o "$out/etcd.tmp" go.etcd.io/etcd/server/v3)
  mv "$out/etcd.tmp" "$out/etcd"
}

build_helm() {
  local v=$HELM_VERSION out="$bin_dir/helm-$HELM_VERSION"
  if [[ -x "$out/helm" ]]; then
    log "helm $v already built in $out"
    return
  fi
  local dir="$src_dir/helm-$v"
  go_tools_module "$dir" helm.sh/helm/v3 "$v" helm.sh/helm/v3/cmd/helm
  log "building helm $v"
  (cd "$dir" && go mod tidy && mkdir -p "$out" && go build -trimpath -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$v" -o "$out/helm.tmp" helm.sh/helm/v3/cmd/helm)
  mv "$out/helm.tmp" "$out/helm"
}

# actionlint: `go install` of its command at the pinned version, into its own directory (the
# module's own go.mod and go.sum pin its dependencies, so no tools module is needed).
build_actionlint() {
  local v=$ACTIONLINT_VERSION out="$bin_dir/actionlint-$ACTIONLINT_VERSION"
  if [[ -x "$out/actionlint" ]]; then
    log "actionlint $v already built in $out"
    return
  fi
  log "building actionlint $v"
  mkdir -p "$out"
  GOBIN="$out" GOFLAGS= go install -trimpath -ldflags "-s -w -X github.com/rhysd/actionlint.version=$v" \
    "github.com/rhysd/actionlint/cmd/actionlint@$v"
}

# containerd, its runc shim (containerd 2 cannot drive Debian's 1.6 shim: "type with url ...:
# not found") and ctr, which imports the images a real node cannot pull here. The tags leave out
# the snapshotters that would need cgo or kernel features this machine lacks; overlayfs stays.
build_containerd() {
  local v=$CONTAINERD_VERSION out="$bin_dir/containerd-$CONTAINERD_VERSION"
  local cmds=(containerd containerd-shim-runc-v2 ctr) missing c
  mapfile -t missing < <(missing_commands "$out" "${cmds[@]}")
  if [[ ${#missing[@]} -eq 0 ]]; then
    log "containerd $v already built in $out"
    return
  fi
  local module=github.com/containerd/containerd/v2 dir="$src_dir/containerd-$v" pkgs=()
  for c in "${cmds[@]}"; do pkgs+=("$module/cmd/$c"); done
  go_tools_module "$dir" "$module" "$v" "${pkgs[@]}"
  log "resolving containerd $v"
  (cd "$dir" && go mod tidy)
  local ldflags="-s -w -X $module/version.Version=$v -X $module/version.Package=$module"
  go_build_commands "$dir" "$out" no_btrfs,no_devmapper,no_zfs "$ldflags" "$module/cmd" "${missing[@]}"
}

# The real nodes' pod sandbox ("pause") program: no registry serves registry.k8s.io/pause here,
# so the node's pause image is built from this, a static Go program that does what the upstream
# one does: waits for SIGINT or SIGTERM, and reaps the zombies a PID namespace hands it.
build_pause() {
  local out="$bin_dir/pause/pause"
  if [[ -x "$out" ]]; then
    log "pause already built in $out"
    return
  fi
  local dir="$src_dir/pause"
  mkdir -p "$dir" "$(dirname "$out")"
  printf 'module membench.io/tools/pause\n\ngo 1.26.0\n' >"$dir/go.mod"
  cat >"$dir/main.go" <<'GO'
// pause: the pod sandbox's process. Holds the pod's namespaces until told to stop.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	child := make(chan os.Signal, 16)
	signal.Notify(child, syscall.SIGCHLD)
	for {
		select {
		case <-stop:
			os.Exit(0)
		case <-child:
			for {
				var status syscall.WaitStatus
				pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}
GO
  log "building pause"
  (cd "$dir" && go build -trimpath -ldflags "-s -w" -o "$out.tmp" .)
  mv "$out.tmp" "$out"
}

# The dev cluster's image registry, which its real nodes pull from (hack/dev-cluster-registry.sh):
# CNCF distribution's `registry`, the implementation behind Docker Hub, Harbor and GitLab's
# registries. Built from a module of its own like the rest (its go.mod has no replace
# directives, but a tools module keeps its dependency versions apart from the others').
build_registry() {
  local v=$REGISTRY_VERSION out="$bin_dir/registry-$REGISTRY_VERSION"
  if [[ -x "$out/registry" ]]; then
    log "registry $v already built in $out"
    return
  fi
  local module=github.com/distribution/distribution/v3 dir="$src_dir/registry-$v"
  go_tools_module "$dir" "$module" "$v" "$module/cmd/registry"
  log "building registry (distribution) $v"
  (cd "$dir" && go mod tidy && mkdir -p "$out" &&
    go build -trimpath -ldflags "-s -w -X $module/version.version=$v" -o "$out/registry.tmp" "$module/cmd/registry")
  mv "$out/registry.tmp" "$out/registry"
}

tools=("$@")
[[ ${#tools[@]} -gt 0 ]] || tools=(etcd kubernetes helm containerd actionlint registry)
for t in "${tools[@]}"; do
  case "$t" in
    kubernetes) build_kubernetes ;;
    etcd) build_etcd ;;
    helm) build_helm ;;
    containerd) build_containerd; build_pause ;;
    actionlint) build_actionlint ;;
    registry) build_registry ;;
    *) echo "build-tools.sh: unknown tool '$t' (expected kubernetes, etcd, helm, containerd, actionlint or registry)" >&2; exit 2 ;;
  esac
done
log "done: binaries in $bin_dir"
