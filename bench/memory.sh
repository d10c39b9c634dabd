#!/usr/bin/env bash
# The backend's memory under a long retry storm (issue 15): 1,000,000 requests spread over
# 100,000 distinct keys (bench/memory-replays.lua: each key's first request pays, the rest
# replay), against a server-profile backend on PostgreSQL with an instant bank, once with the
# default replay cache bound (64 MiB) and once with 16 MiB. For each: the backend's resident
# memory (VmRSS) at start and after the storm, the cache's entries and bytes (its metrics), and
# the configured bound, so "RSS stays within the bound plus a fixed base" can be read off. Ends
# with the money check.
# Usage: bench/memory.sh [requests, default 1000000] [distinct keys, default 100000]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source bench/lib.sh
export REQUESTS=${1:-1000000} KEYS=${2:-100000}
need_wrk
scripts/start-postgres.sh
cargo build -q --profile server -p backend -p bank-simulator --bins
bin=target/server

rss_mib() { awk '/^VmRSS/ { printf "%.1f", $2 / 1024 }' "/proc/$backend_pid/status"; }
metric() { curl -sf "$admin/metrics" | awk -v name="$1" '$1 == name { print $2 }'; }
replied() { # payment requests the backend has replied to so far, any status
  curl -sf "$admin/metrics" \
    | awk '/^payments_http_requests_total\{route="\/v1\/bills\/\{bill_id\}\/pay"/ { n += $2 } END { print n + 0 }'
}

printf '%-10s %10s %10s %12s %14s %12s %10s\n' bound_MiB rss_start rss_after cache_keys cache_MiB base_MiB req/s
for bound_mib in 64 16; do
  REPLAY_CACHE_MAX_BYTES=$((bound_mib << 20)) DB_PARAMS=sslmode=disable \
    start_stack memory "$bin/backend" >/dev/null
  start=$(rss_mib)
  wrk -t2 -c16 -d1h --timeout 30s -H "Authorization: Bearer $token" \
    -s bench/memory-replays.lua "$api" >/dev/null & wrk_pid=$!
  began=$(date +%s.%N)
  until [ "$(replied)" -ge "$REQUESTS" ]; do
    kill -0 "$wrk_pid" || { echo "wrk stopped early" >&2; exit 1; }
    sleep 0.5
  done
  rate=$(awk -v n="$(replied)" -v b="$began" -v e="$(date +%s.%N)" 'BEGIN { print n / (e - b) }')
  kill "$wrk_pid"; wait "$wrk_pid" || true
  after=$(rss_mib)
  entries=$(metric payments_idempotency_replay_cache_entries)
  cache_mib=$(awk -v b="$(metric payments_idempotency_replay_cache_bytes)" 'BEGIN { printf "%.1f", b / 1048576 }')
  base=$(awk -v a="$after" -v c="$cache_mib" 'BEGIN { printf "%.1f", a - c }')
  printf '%-10s %10s %10s %12s %14s %12s %10.0f\n' "$bound_mib" "$start" "$after" "$entries" \
    "$cache_mib" "$base" "$rate"
  check_money >&2
  stop_stack
done
echo "(MiB; base = RSS after the storm less what the cache holds: the process without its replies)"
