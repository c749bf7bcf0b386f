#!/usr/bin/env bash
# Install the system tools the integration tests drive besides the harnesses: Debian's
# `chromium`, the headless browser the board's browser tests (tests/it/board_browser.rs) and
# the board benchmark (benches/board.rs) run. No browser download of any library: the tests use
# the distribution's build, with the Liberation fonts it recommends (the README's screenshot of
# the board is drawn with them). Idempotent: nothing is fetched when both are in place.
set -euo pipefail

chromium_version() { chromium --version 2>/dev/null || true; }
fonts=/usr/share/fonts/truetype/liberation

if [[ -n "$(chromium_version)" && -d "$fonts" ]]; then
  echo "test tools already installed: $(chromium_version), fonts-liberation" >&2
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "error: chromium not found on PATH and apt-get is missing; install Chromium (a \`chromium\` on PATH), then rerun $0" >&2
  exit 1
fi

sudo=()
if [[ "$(id -u)" != 0 ]]; then
  if ! command -v sudo >/dev/null 2>&1; then
    echo "error: chromium not found on PATH; run \`apt-get install -y chromium fonts-liberation\` as root, then rerun $0" >&2
    exit 1
  fi
  sudo=(sudo)
fi

echo "installing Debian's chromium and fonts-liberation" >&2
# A fresh machine's package lists may be missing or stale: update them once, then install.
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-liberation >/dev/null

if [[ -z "$(chromium_version)" || ! -d "$fonts" ]]; then
  echo "error: \`chromium --version\` fails or $fonts is missing after apt-get install chromium fonts-liberation" >&2
  exit 1
fi
echo "test tools installed: $(chromium_version)" >&2
