#!/usr/bin/env bash
# Edge gate cost: the gate's whole check of one guarded request (route, HS256 bearer token, body
# size/depth/JSON and fingerprint of a 1 KB pay body, Idempotency-Key, fields), in microseconds
# per request natively (the server profile) and in Wasm under Node (the Worker's release
# profile, then wasm-opt -Oz as the Worker's build), side by side in one run; and the Worker
# module's size, raw and gzipped. Compared with the aims (gate <= 50 µs per request in Wasm,
# module <= 200 KiB gzipped): PASS or OVER, a report that never fails on OVER.
# Usage: bench/edge-gate.sh [requests per timed batch, default 20000]
# Needs node and the wasm-bindgen CLI at Cargo.lock's version; builds the Worker
# (scripts/build-edge.sh) if edge/build/index_bg.wasm is missing. Run scripts/setup-tools.sh first.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
rounds=${1:-20000}
target=${CARGO_TARGET_DIR:-target}
gate_limit_us=50
module_limit_bytes=$((200 * 1024))

cargo build -q --profile server -p gate-bench --bin gate-bench
cargo build -q --release -p gate-bench --lib --target wasm32-unknown-unknown
wasm_out="$target/gate-bench-wasm"
rm -rf "$wasm_out"
wasm-bindgen --target nodejs --out-dir "$wasm_out" \
  "$target/wasm32-unknown-unknown/release/gate_bench.wasm"
# The flags worker-build gives wasm-opt, with edge/Cargo.toml's -Oz.
wasm_opt=node_modules/.bin/wasm-opt
if [ -x "$wasm_opt" ]; then
  "$wasm_opt" "$wasm_out/gate_bench_bg.wasm" -o "$wasm_out/gate_bench_bg.wasm" -Oz \
    --enable-mutable-globals --enable-sign-ext --enable-nontrapping-float-to-int \
    --enable-bulk-memory --enable-multivalue --enable-reference-types \
    --enable-exception-handling --debuginfo
  optimised="wasm-opt -Oz"
else
  optimised="no wasm-opt (run scripts/setup-tools.sh): slower than the Worker's build"
fi

native_us=$("$target/server/gate-bench" "$rounds")
wasm_us=$(node bench/edge-gate.mjs "$wasm_out/gate_bench.js" "$rounds")

module=edge/build/index_bg.wasm
[ -f "$module" ] || scripts/build-edge.sh
module_raw=$(stat -c %s "$module")
module_gzipped=$(gzip -9 -c "$module" | wc -c)

verdict() { awk -v value="$1" -v limit="$2" 'BEGIN { print (value <= limit ? "PASS" : "OVER") }'; }
echo "edge gate: one guarded POST /v1/bills/{bill}/pay with a 1 KB body (median of 5 batches of $rounds)"
# "µs" is one column but two bytes: the header's width is one more than the rows'.
printf '%-30s %13s %10s\n' "" "µs/request" "vs native"
printf '%-30s %12.3f %10s\n' "native (server profile)" "$native_us" "1.00"
printf '%-30s %12.3f %10.2f   aim <= %s µs: %s\n' "Wasm, Node $(node --version)" "$wasm_us" \
  "$(awk -v w="$wasm_us" -v n="$native_us" 'BEGIN { print w / n }')" \
  "$gate_limit_us" "$(verdict "$wasm_us" "$gate_limit_us")"
echo "  (Wasm: release profile, $optimised)"
echo "Worker module $module (as last built): $module_raw bytes raw, $module_gzipped gzipped (gzip -9);" \
  "aim <= 200 KiB ($module_limit_bytes bytes) gzipped: $(verdict "$module_gzipped" "$module_limit_bytes")"
