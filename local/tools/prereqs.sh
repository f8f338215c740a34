#!/usr/bin/env bash
# Installs or builds everything `make test` needs on a fresh machine, or stops
# before anything runs with one line saying exactly what to install:
#   - Go (the module's go directive) on PATH: needed for everything;
#   - Chromium, for the e2e suite's Temporal UI test: Debian's `chromium`
#     package, installed here when running as root, named otherwise;
#   - the Kubernetes control-plane binaries (etcd, kube-*, kubectl, kwok),
#     built once from their Go modules by local/tools/build.sh and cached in
#     ~/.cache/millwright (a cold build takes ~15-20 min on 2 cores).
# The checks that can fail come first, so a machine that cannot run the tests
# says so at once instead of after a long build.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

fail() { echo "make test: $*" >&2; exit 1; }

command -v go >/dev/null 2>&1 ||
  fail "Go is not on PATH: install Go $(sed -n 's/^go //p' "$repo/go.mod") (https://go.dev/doc/install) and add it to PATH"

chromium_installed() {
  command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ]
}
if ! chromium_installed; then
  if [ "$(id -u)" -ne 0 ]; then
    fail "Chromium is missing (the Temporal UI test drives it headless): run 'sudo apt-get install -y chromium' and run make test again"
  fi
  command -v apt-get >/dev/null 2>&1 ||
    fail "Chromium is missing and this machine has no apt-get: install your distribution's chromium package so that 'chromium' is on PATH"
  echo "==> installing Chromium (Debian's chromium package) for the browser test"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
  chromium_installed || fail "apt-get installed chromium but no 'chromium' is on PATH"
fi

echo "==> control-plane binaries (built once, cached in ~/.cache/millwright)"
"$repo/local/tools/build.sh" >/dev/null
