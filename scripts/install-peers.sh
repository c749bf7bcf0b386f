#!/usr/bin/env bash
# Install the pinned real harnesses (Codex CLI, Claude Code, Gemini CLI) into <repo>/.peers so
# the integration tests can drive the real binaries offline against the fakes in
# tests/it/support, and the pinned asciinema that plays the casts spex exports.
# Idempotent: when the installed binaries already report the pinned versions, nothing is fetched.
set -euo pipefail

script_dir="${BASH_SOURCE[0]%/*}"
[[ "$script_dir" == "${BASH_SOURCE[0]}" ]] && script_dir=.
repo="$(cd "$script_dir/.." && pwd)"
# shellcheck source=scripts/peers.env
source "$repo/scripts/peers.env"
: "${CODEX_VERSION:?CODEX_VERSION missing from scripts/peers.env}"
: "${CLAUDE_VERSION:?CLAUDE_VERSION missing from scripts/peers.env}"
: "${GEMINI_VERSION:?GEMINI_VERSION missing from scripts/peers.env}"

prefix="$repo/.peers"
bin="$prefix/node_modules/.bin"

# Prints nothing and fails when a binary is missing or broken, so a stale or half-finished
# install never counts as "already installed".
codex_version() { "$bin/codex" --version 2>/dev/null || true; }
claude_version() { "$bin/claude" --version 2>/dev/null || true; }
gemini_version() { "$bin/gemini" --version 2>/dev/null || true; }

installed() {
  [[ "$(codex_version)" == "codex-cli $CODEX_VERSION" ]] &&
    [[ "$(claude_version)" == "$CLAUDE_VERSION"* ]] &&
    [[ "$(gemini_version)" == "$GEMINI_VERSION" ]]
}

# asciinema, in its own virtual environment under .peers: the tests play the asciicasts spex
# exports through it.
: "${ASCIINEMA_VERSION:?ASCIINEMA_VERSION missing from scripts/peers.env}"
asciinema="$prefix/asciinema/bin/asciinema"
asciinema_version() { "$asciinema" --version 2>/dev/null || true; }
if [[ "$(asciinema_version)" != "asciinema $ASCIINEMA_VERSION" ]]; then
  if ! command -v python3 >/dev/null 2>&1; then
    echo "error: python3 not found on PATH; install Python 3 (with venv), then rerun $0" >&2
    exit 1
  fi
  echo "installing asciinema==$ASCIINEMA_VERSION into $prefix/asciinema" >&2
  rm -rf "$prefix/asciinema"
  python3 -m venv "$prefix/asciinema"
  "$prefix/asciinema/bin/pip" install --quiet --disable-pip-version-check "asciinema==$ASCIINEMA_VERSION"
  if [[ "$(asciinema_version)" != "asciinema $ASCIINEMA_VERSION" ]]; then
    echo "error: asciinema --version says '$(asciinema_version)' (want 'asciinema $ASCIINEMA_VERSION')" >&2
    exit 1
  fi
fi

if installed; then
  echo "peers already installed: codex-cli $CODEX_VERSION, claude $CLAUDE_VERSION, gemini $GEMINI_VERSION ($bin), asciinema $ASCIINEMA_VERSION" >&2
  exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
  echo "error: npm not found on PATH; install Node.js (>= 20, which Gemini CLI needs) with npm, then rerun $0" >&2
  exit 1
fi

mkdir -p "$prefix"
# Claude Code's postinstall copies the native binary over the bin/claude.exe placeholder;
# without it `claude` is a stub. npm >= 11 only runs dependency install scripts listed in
# package.json `allowScripts` (project installs reject --allow-scripts on the command line),
# so declare it here, pinned to the exact version we reviewed. Older npm ignores the field.
# Rewriting package.json also drops pins from a previous version of peers.env.
cat >"$prefix/package.json" <<JSON
{
  "private": true,
  "description": "Pinned real harnesses for spex integration tests (scripts/install-peers.sh)",
  "allowScripts": { "@anthropic-ai/claude-code@$CLAUDE_VERSION": true }
}
JSON

echo "installing @openai/codex@$CODEX_VERSION @anthropic-ai/claude-code@$CLAUDE_VERSION @google/gemini-cli@$GEMINI_VERSION into $prefix" >&2
npm install --prefix "$prefix" --no-audit --no-fund --save-exact \
  "@openai/codex@$CODEX_VERSION" "@anthropic-ai/claude-code@$CLAUDE_VERSION" \
  "@google/gemini-cli@$GEMINI_VERSION"

# If the postinstall was skipped anyway (e.g. ignore-scripts=true in a user npmrc), run the
# same step by hand: it only links the platform binary into place.
if [[ "$(claude_version)" != "$CLAUDE_VERSION"* ]]; then
  echo "claude binary not in place after npm install; running its install.cjs" >&2
  (cd "$prefix/node_modules/@anthropic-ai/claude-code" && node install.cjs)
fi

if ! installed; then
  echo "error: installed peers do not report the pinned versions" >&2
  echo "  codex --version:  '$(codex_version)' (want 'codex-cli $CODEX_VERSION')" >&2
  echo "  claude --version: '$(claude_version)' (want '$CLAUDE_VERSION...')" >&2
  echo "  gemini --version: '$(gemini_version)' (want '$GEMINI_VERSION')" >&2
  exit 1
fi
echo "peers installed: $(codex_version), claude $(claude_version), gemini $(gemini_version) ($bin)" >&2
