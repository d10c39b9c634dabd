#!/usr/bin/env bash
# Builds the static (musl) binaries the container checks put in images: the backend (the
# Dockerfile's `prebuilt` stage copies it) and the bank simulator (compose's stand-in for the
# bank). One cargo invocation for both, so deploy/verify-container.sh and
# deploy/verify-compose.sh share one build: built separately, the two packages' features unify
# differently and the second check would compile the backend's dependencies again.
# It builds in a target directory of its own, target/static (cargo lets one build at a time use
# a target directory), so that tests/run-all.sh can run it in the background, at the lowest CPU
# priority, while the tests build and run; the binaries are then copied where the Dockerfile's
# `prebuilt` stage and docs/operations.md expect them. Prints the directory that holds them.
# Needs scripts/setup-tools.sh's musl-gcc and musl target.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

command -v musl-gcc >/dev/null || { echo "build-static: musl-gcc is missing; run scripts/setup-tools.sh" >&2; exit 1; }
# The embedded SQLite store and ring (rustls's cryptography) compile C: a C compiler for musl.
export CC_x86_64_unknown_linux_musl=musl-gcc
CARGO_TARGET_DIR=target/static cargo build -q --locked --profile server --target x86_64-unknown-linux-musl \
  -p backend -p bank-simulator --bin backend --bin bank-simulator
directory=target/x86_64-unknown-linux-musl/server
mkdir -p "$directory"
for binary in backend bank-simulator; do
  built=target/static/x86_64-unknown-linux-musl/server/$binary
  file "$built" | grep -qE 'static(-pie)? linked' || {
    echo "build-static: $built is not statically linked" >&2
    exit 1
  }
  cmp -s "$built" "$directory/$binary" || cp "$built" "$directory/$binary"
done
echo "$directory"
