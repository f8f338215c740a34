#!/usr/bin/env bash
# Builds (or reuses) the local Kubernetes control-plane binaries and prints the
# directory holding them. Safe to run concurrently and on every CI run: it returns
# at once when the binaries for the current pins already exist.
#   MILLWRIGHT_TOOLS_DIR  put the binaries here instead of the user cache dir
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
export GOTOOLCHAIN=local
exec go run ./local/cluster/cmd/kube-tools -source "$repo/local/tools" "$@"
