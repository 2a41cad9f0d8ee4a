#!/usr/bin/env bash
# Installs what the dev cluster's real nodes (hack/dev-cluster.sh, `:kubelet` pools) need from
# Debian, on a Debian 12 machine: runc (1.1.5, the OCI runtime containerd's shim drives) and
# containernetworking-plugins (1.1.1: `bridge` and `host-local` give pods their addresses),
# plus iproute2 (the shared bridge) and util-linux (`unshare`, `nsenter`: a mount namespace per
# node), and for the dev cluster's image registry (hack/dev-cluster-registry.sh) apache2-utils
# (`htpasswd -B`: its bcrypt password file) and skopeo (pushes the images to it). The kubelet
# and containerd are not Debian's: hack/build-tools.sh builds them from Go modules (the kubelet
# in the control plane's own workspace; Debian's containerd is 1.6, whose CRI the kubelet only
# half supports). Idempotent: what is installed is skipped, so a second run
# takes a second.
set -euo pipefail

log() { printf '[install-node-runtime] %s\n' "$*" >&2; }

installed() { dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null | grep -qx installed; }
apt_packages=()
for package in runc containernetworking-plugins iproute2 util-linux apache2-utils skopeo; do
  installed "$package" || apt_packages+=("$package")
done
if [ ${#apt_packages[@]} -gt 0 ]; then
  command -v apt-get >/dev/null || { log "needs apt-get (Debian or Ubuntu) to install ${apt_packages[*]}"; exit 1; }
  [ "$(id -u)" = 0 ] || { log "needs root to install ${apt_packages[*]} (run it with sudo)"; exit 1; }
  # Other installs may hold the dpkg lock (several sessions share a machine): wait for it.
  apt_get() { DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 "$@"; }
  log "apt-get install ${apt_packages[*]}"
  apt_get update -qq
  apt_get install -y -qq --no-install-recommends "${apt_packages[@]}" >/dev/null
fi
log "$(runc --version | head -1); CNI plugins $(dpkg-query -W -f='${Version}' containernetworking-plugins) in /usr/lib/cni"
