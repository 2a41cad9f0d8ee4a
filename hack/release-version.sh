#!/usr/bin/env bash
# The version a release tag names, checked against what the tag will publish: the chart's
# appVersion (the image tag the chart installs by default) and the membench crate's version
# (what `membench --version` prints). .github/workflows/release.yml runs it first, so a tag that
# disagrees with either fails before anything is built or pushed.
#
# usage: hack/release-version.sh TAG      (TAG is v<version>, for example v0.1.0; prints <version>)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

die() {
  printf 'release-version: %s\n' "$*" >&2
  exit 1
}

[[ $# -eq 1 ]] || die "usage: hack/release-version.sh TAG (for example v0.1.0)"
tag=$1
[[ "$tag" =~ ^v[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.+-]*)?$ ]] ||
  die "tag '$tag' is not v<major>.<minor>.<patch> (for example v0.1.0)"
version=${tag#v}

# appVersion: "0.1.0" (quotes optional), at the top level of Chart.yaml.
chart=charts/membench/Chart.yaml
app_version=$(sed -n 's/^appVersion:[[:space:]]*"\{0,1\}\([^"[:space:]]*\)"\{0,1\}[[:space:]]*$/\1/p' "$chart")
[[ -n "$app_version" ]] || die "$chart has no appVersion"

# version = "0.1.0" in the [package] table of operator/Cargo.toml.
manifest=operator/Cargo.toml
crate_version=$(awk '
  /^\[/ { in_package = ($0 == "[package]") }
  in_package && /^version[[:space:]]*=/ { gsub(/^version[[:space:]]*=[[:space:]]*"|".*$/, ""); print; exit }
' "$manifest")
[[ -n "$crate_version" ]] || die "$manifest has no [package] version"

problems=()
[[ "$app_version" == "$version" ]] ||
  problems+=("$chart has appVersion $app_version, the tag $tag says $version: set appVersion: \"$version\"")
[[ "$crate_version" == "$version" ]] ||
  problems+=("$manifest has version $crate_version, the tag $tag says $version: set version = \"$version\" (and run cargo update -p membench)")
if [[ ${#problems[@]} -gt 0 ]]; then
  for p in "${problems[@]}"; do printf 'release-version: %s\n' "$p" >&2; done
  exit 1
fi
echo "$version"
