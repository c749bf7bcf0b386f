#!/usr/bin/env bash
# Build spex from this checkout and install the binary into $PREFIX/bin (default ~/.local).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
prefix="${PREFIX:-$HOME/.local}"
if ! command -v cargo >/dev/null 2>&1; then
  echo "error: cargo not found; install Rust (https://rustup.rs), then rerun $0" >&2
  exit 1
fi
cargo install --locked --quiet --path . --root "$prefix" --force
echo "installed $prefix/bin/spex ($("$prefix/bin/spex" --version))" >&2
case ":$PATH:" in
  *":$prefix/bin:"*) ;;
  *) echo "hint: add $prefix/bin to PATH" >&2 ;;
esac
