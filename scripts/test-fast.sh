#!/usr/bin/env bash
# The fast loop: the pure rules and the contract suite on SQLite, in a few minutes, with no
# PostgreSQL, no Worker build and no container. Run it while changing code; run
# tests/run-all.sh (every test, both stores, the Worker under workerd, the soaks, the container)
# before you push.
#
# What it runs: the shared crate's and the edge's pure tests, the client library's, the
# backend's unit tests (the group commit, the generated docs and pgbench scripts), every
# contract test that runs on SQLite (`on_sqlite::…`, with the real bank simulator over HTTP;
# not those through the edge, which need its build), the check that no backend module depends on one that depends on it (`layers`), and the check
# that the docs cite only what exists.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n==> %s\n' "$*"; }

step "format"
cargo fmt --all -- --check

step "pure rules: shared, edge, client"
cargo test --locked -p shared -p edge -p payments-client --lib

step "backend unit tests, and the flows on SQLite with an in-memory bank"
cargo test --locked -p backend --lib
cargo test --locked -p backend --test flows

step "contract suite on SQLite, and the module layering"
cargo test --locked -p backend --test contract -- on_sqlite layers --skip through_the

step "docs cite what exists"
cargo test --locked -p test-harness --test docs_cite_what_exists
