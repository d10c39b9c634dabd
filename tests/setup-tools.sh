#!/usr/bin/env bash
# Installs the tools the build and the tests need, on a fresh machine or this one: the Wasm
# target and the wasm-bindgen CLI (with its test runner) at exactly the wasm-bindgen version in
# Cargo.lock. Idempotent: a second run only checks. Sourced by tests/run-all.sh and dev scripts.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

rustup target list --installed | grep -qx wasm32-unknown-unknown \
  || rustup target add wasm32-unknown-unknown

locked_wasm_bindgen=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/[^0-9.]/, ""); print; exit }' Cargo.lock)
if [ -z "$locked_wasm_bindgen" ]; then
  echo "setup-tools: no wasm-bindgen in Cargo.lock; run 'cargo generate-lockfile' first" >&2
  exit 1
fi
installed=$(wasm-bindgen --version 2>/dev/null | awk '{ print $2 }' || true)
if [ "$installed" != "$locked_wasm_bindgen" ]; then
  echo "setup-tools: installing wasm-bindgen-cli $locked_wasm_bindgen (found '${installed:-none}'; ~5 min once)"
  cargo install wasm-bindgen-cli --version "=$locked_wasm_bindgen"
fi
command -v node >/dev/null || { echo "setup-tools: Node.js is required for the Wasm tests (apt-get install nodejs)" >&2; exit 1; }
