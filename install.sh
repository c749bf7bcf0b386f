#!/usr/bin/env bash
# Build spex from this checkout and install the binary into $PREFIX/bin (default ~/.local).
# A first build compiles every dependency in release mode (minutes on a small machine); cargo's
# own progress (each crate as it compiles, a progress bar on a terminal) is shown throughout.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
prefix="${PREFIX:-$HOME/.local}"
if ! command -v cargo >/dev/null 2>&1; then
  echo "error: cargo not found; install Rust (https://rustup.rs), then rerun $0" >&2
  exit 1
fi
echo "building spex in release mode and installing it to $prefix/bin (a first build takes a few minutes)..." >&2
start=$(date +%s)
cargo install --locked --path . --root "$prefix" --force
echo "installed $prefix/bin/spex ($("$prefix/bin/spex" --version)) in $(( $(date +%s) - start )) s" >&2
case ":$PATH:" in
  *":$prefix/bin:"*) ;;
  *) echo "hint: add $prefix/bin to PATH" >&2 ;;
esac
