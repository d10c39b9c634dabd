#!/usr/bin/env bash
# Installs the tools the build and the tests need, on a fresh machine or this one: the Wasm
# target and the wasm-bindgen CLI (with its test runner) at exactly the wasm-bindgen version in
# Cargo.lock; for the edge Worker, worker-build and the npm packages package-lock.json pins
# (wrangler with workerd and esbuild, a Node 22 binary for wrangler, binaryen for wasm-opt);
# cargo-deny for the supply-chain check (deny.toml). Every `cargo install` is pinned and
# `--locked`: the tool is built with the dependency versions its authors tested, not the newest.
# Idempotent: a second run only checks. Sourced by tests/run-all.sh and dev scripts.
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
  cargo install --locked wasm-bindgen-cli --version "=$locked_wasm_bindgen"
fi
command -v node >/dev/null || { echo "setup-tools: Node.js is required for the Wasm tests (apt-get install nodejs)" >&2; exit 1; }

# The edge Worker's build (scripts/build-edge.sh) and its end-to-end tests (workerd).
worker_build_version=0.8.7
if [ "$(worker-build --version 2>/dev/null || true)" != "$worker_build_version" ]; then
  echo "setup-tools: installing worker-build $worker_build_version (~5 min once)"
  cargo install --locked worker-build --version "=$worker_build_version"
fi
command -v npm >/dev/null || { echo "setup-tools: npm is required for the edge tools (apt-get install npm)" >&2; exit 1; }
if ! npm ls --depth=0 >/dev/null 2>&1; then
  echo "setup-tools: installing the edge's npm packages (package-lock.json)"
  npm ci --no-audit --no-fund
fi

# The supply-chain check in tests/run-all.sh (licences, bans, sources: deny.toml).
cargo_deny_version=0.20.2
if [ "$(cargo deny --version 2>/dev/null || true)" != "cargo-deny $cargo_deny_version" ]; then
  echo "setup-tools: installing cargo-deny $cargo_deny_version (~3 min once)"
  cargo install --locked cargo-deny --version "=$cargo_deny_version"
fi
