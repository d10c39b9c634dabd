#!/usr/bin/env bash
# Runs every test of the project, the one command the README gives and .ci/run calls.
# Installs what is missing first, then: format and lint checks, the native test suites, and the
# shared crate's tests again under wasm32-unknown-unknown (in Node, via wasm-bindgen-test).
# Exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n==> %s\n' "$*"; }

step "tools"
tests/setup-tools.sh

step "format"
cargo fmt --all -- --check

step "lint (native and wasm32)"
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo clippy -p shared --all-targets --target wasm32-unknown-unknown --locked -- -D warnings

step "native tests"
cargo test --workspace --locked

step "shared crate under wasm32-unknown-unknown (Node)"
cargo test -p shared --lib --target wasm32-unknown-unknown --locked

step "all suites passed"
