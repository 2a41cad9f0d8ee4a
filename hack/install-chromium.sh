#!/usr/bin/env bash
# Installs Debian's Chromium, which the tests of `--output html` use as a headless browser: the
# page must render, with its charts, in a real browser. Only the tests need it (not
# `membench run`), so hack/test.sh runs this script and hack/install-engines.sh does not.
# Idempotent: a machine that has it already is left alone and the script takes no time.
set -euo pipefail

log() { printf '[install-chromium] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

if command -v chromium >/dev/null; then
  log "chromium already installed: $(chromium --version 2>/dev/null || echo 'version unknown')"
  exit 0
fi
command -v apt-get >/dev/null || die "needs apt-get (Debian or Ubuntu) to install chromium"
[ "$(id -u)" = 0 ] || die "needs root to install chromium (run it with sudo)"
log "apt-get install chromium"
apt-get update -qq
# fonts-liberation: a font with metrics for the page's sans-serif text; the page itself loads
# no fonts.
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-liberation >/dev/null
log "installed $(chromium --version)"
