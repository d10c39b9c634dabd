#!/usr/bin/env bash
# Load run: throughput of new-key payments and of replays against a release backend with an
# instant bank simulator, side by side with GET /healthz (no database) as the ceiling, in one run.
# Usage: bench/load.sh [seconds per run, default 10] [connections, default 16]
# Needs wrk (apt-get install wrk). Everything binds 127.0.0.1.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
duration=${1:-10}
connections=${2:-16}
command -v wrk >/dev/null || { apt-get install -y -qq wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }; }
scripts/start-postgres.sh
cargo build -q --profile server -p backend -p bank-simulator --bins
bin=target/server

db=load_bench_$$
psql -q -h 127.0.0.1 -U postgres -d postgres -c "CREATE DATABASE $db"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  psql -q -h 127.0.0.1 -U postgres -d postgres -c "DROP DATABASE IF EXISTS $db" || true
}
trap cleanup EXIT

export APP_ENV=development DATABASE_URL="postgres://postgres@127.0.0.1:5432/$db" \
  BANK_URL=http://127.0.0.1:18081 LISTEN_ADDR=127.0.0.1:18080 POLICY_FILE=policy.yaml RUST_LOG=warn
$bin/bank-simulator --listen 127.0.0.1:18081 >/dev/null 2>&1 & pids+=($!)
$bin/backend serve >/dev/null 2>&1 & pids+=($!)
for _ in $(seq 1 100); do curl -sf http://127.0.0.1:18080/readyz >/dev/null && break; sleep 0.1; done
token=$($bin/backend dev-token --user 42)
api=http://127.0.0.1:18080

export REPLAY_KEY=$(cat /proc/sys/kernel/random/uuid)
curl -sf -o /dev/null -X POST "$api/v1/bills/elec-replay/pay" -H "Authorization: Bearer $token" \
  -H "Idempotency-Key: $REPLAY_KEY" -H 'Content-Type: application/json' \
  -d '{"amount_paise":230000,"payer_vpa":"asha@okbank"}'

run() { # name, then wrk arguments; prints "name requests/s"
  local name=$1; shift
  local rps
  rps=$(wrk -t2 -c"$connections" -d"${duration}s" -H "Authorization: Bearer $token" "$@" \
        | awk '/Requests\/sec/ { print $2 }')
  printf '%s %s\n' "$name" "$rps"
}
results=$(
  run healthz "$api/healthz"
  run replay -s bench/replay.lua "$api"
  run new_key -s bench/new-key.lua "$api"
)
echo "$results" | awk -v conns="$connections" '
  { rps[$1] = $2; order[NR] = $1 }
  END {
    printf "%-34s %12s %10s\n", "run (" conns " connections)", "requests/s", "vs healthz"
    for (i = 1; i <= NR; i++) { n = order[i]; printf "%-34s %12.0f %10.3f\n", n, rps[n], rps[n] / rps["healthz"] }
  }'

# wrk closes its connections mid-request at the end; the server finishes that work regardless.
for _ in $(seq 1 50); do
  unfinished=$(psql -h 127.0.0.1 -U postgres -d "$db" -Atc "SELECT count(*) FROM idempotency_keys WHERE state <> 'done'")
  [ "$unfinished" = 0 ] && break
  sleep 0.1
done
debits=$(curl -sf http://127.0.0.1:18081/ledger | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["debits"]))')
payments=$(psql -h 127.0.0.1 -U postgres -d "$db" -Atc "SELECT count(*) FROM payments WHERE status = 'succeeded'")
echo "check: bank debits $debits, succeeded payments $payments (must be equal), unfinished keys $unfinished"
[ "$debits" = "$payments" ]
