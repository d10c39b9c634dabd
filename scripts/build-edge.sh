#!/usr/bin/env bash
# Builds the edge Worker (edge/build/index.js and edge/build/index_bg.wasm) with worker-build
# and local tools only, never a download: the wasm-bindgen CLI on PATH (at exactly Cargo.lock's
# wasm-bindgen version), esbuild from wrangler's npm install, wasm-opt from the npm binaryen
# package. Run scripts/setup-tools.sh first on a fresh machine. Prints the module's size.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

fail() { echo "build-edge: $*" >&2; exit 1; }

locked=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/[^0-9.]/, ""); print; exit }' Cargo.lock)
[ -n "$locked" ] || fail "no wasm-bindgen in Cargo.lock; run 'cargo generate-lockfile' first"
installed=$(wasm-bindgen --version 2>/dev/null | awk '{ print $2 }' || true)
if [ "$installed" != "$locked" ]; then
  fail "the wasm-bindgen CLI is '${installed:-missing}' but Cargo.lock pins $locked; fix with:
  cargo install wasm-bindgen-cli --version =$locked
(or run scripts/setup-tools.sh, which does it)"
fi
command -v worker-build >/dev/null \
  || fail "worker-build is missing; run scripts/setup-tools.sh (cargo install worker-build --version =0.8.7)"
esbuild="$PWD/node_modules/@esbuild/linux-x64/bin/esbuild"
wasm_opt="$PWD/node_modules/.bin/wasm-opt"
[ -x "$esbuild" ] && [ -x "$wasm_opt" ] \
  || fail "esbuild or wasm-opt is missing from node_modules; run scripts/setup-tools.sh (npm ci)"

WASM_BINDGEN_BIN=$(command -v wasm-bindgen)
export WASM_BINDGEN_BIN ESBUILD_BIN="$esbuild" WASM_OPT_BIN="$wasm_opt"
(cd edge && worker-build --release)

wasm=edge/build/index_bg.wasm
[ -f edge/build/index.js ] && [ -f "$wasm" ] || fail "worker-build did not produce edge/build/index.js and $wasm"
# worker-build keeps the names section (about 30 KB gzipped) for readable stack traces; the
# Worker ships without it: a panic still logs its message; only its stack frames lose their names.
# With the names gone, -Oz runs once more: worker-build's own run keeps debug information
# (`--debuginfo`), which holds some optimisations back, and a second run finds a little more
# (together about 2.8 KB gzipped). The features are worker-build's own list, so no encoding
# that workerd cannot load is emitted.
features=(--enable-mutable-globals --enable-sign-ext --enable-nontrapping-float-to-int
  --enable-bulk-memory --enable-multivalue --enable-reference-types --enable-exception-handling)
"$wasm_opt" "$wasm" -o "$wasm" "${features[@]}" --strip-debug --strip-producers -Oz
raw=$(stat -c %s "$wasm")
gzipped=$(gzip -9 -c "$wasm" | wc -c)
echo "build-edge: $wasm is $raw bytes ($gzipped bytes gzipped)"
