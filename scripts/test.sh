#!/usr/bin/env bash
# The whole test suite: installs the pinned real harnesses (Codex, Claude Code, Gemini CLI) the
# integration tests drive (and top, less, vim for recording the terminal conformance set, when
# missing), then checks formatting and lints, then runs every test.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/install-peers.sh
scripts/install-terminal-programs.sh
cargo fmt --all -- --check
cargo clippy --locked --all-targets -- -D warnings
cargo test --locked
