#!/usr/bin/env bash
# Installs the real terminal programs `scripts/record-cassettes.sh` records for the terminal
# conformance set: `top` (Debian package procps), `less` and `vim` (vim-tiny is enough). Does
# nothing when all three are there; the test suite itself only replays their committed
# cassettes and needs none of them.
set -euo pipefail
need=()
command -v top >/dev/null || need+=(procps)
command -v less >/dev/null || need+=(less)
command -v vim >/dev/null || command -v vim.tiny >/dev/null || need+=(vim-tiny)
[ ${#need[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null; then
    echo "error: install ${need[*]} (no apt-get here)" >&2
    exit 1
fi
sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${need[@]}"
