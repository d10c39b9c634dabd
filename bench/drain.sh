#!/usr/bin/env bash
# How fast reconciliation drains a backlog (issue 15): KEYS (default 10,000) payments whose
# replies were all lost, every key `unknown`, the bank simulator (instant) holding every debit.
# A server-profile backend on PostgreSQL drains them with RECONCILE_CONCURRENCY 1, 8 and 32 (the
# look-up rate cap lifted), then 32 under the default cap of 1,000 look-ups a second; before
# each run the same keys are made `unknown` again (the bank keeps its debits). Prints keys per
# second for each, and checks after each run that every key is `done` and the succeeded
# payments equal the bank's debits (no look-up moved money). These runs lift the rail's rules
# (a policy with status_checks' first check at once and no pace), as the measure is the
# backend's own speed. A last run drains PACED keys (default 600) under the shipped policy's
# pace, 20 status checks a second for the whole deployment (its first-check delay set to 0, the
# keys being a minute old): its rate must be at most the pace, however many places are free.
# Usage: bench/drain.sh [keys, default 10000] [paced keys, default 600]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source bench/lib.sh
keys=${1:-10000}
paced_keys=${2:-600}
scripts/start-postgres.sh
cargo build -q --profile server -p backend -p bank-simulator --bins
bin=target/server

db=drain_$$
databases+=("$db")
bank=http://127.0.0.1:18081
api=http://127.0.0.1:18080
admin=http://127.0.0.1:18082
psql -q -h 127.0.0.1 -U postgres -d postgres -c "CREATE DATABASE $db"
database_url="postgres://postgres@127.0.0.1:5432/$db?sslmode=disable"
rules_off=$(mktemp) paced=$(mktemp)
sed -E -e 's/^( *first_after_seconds:).*/\1 0/' -e 's/^( *quiet_hours:).*/\1 []/' policy.yaml > "$paced"
sed -E 's/^( *per_second:).*/\1 100000/' "$paced" > "$rules_off"
APP_ENV=development DATABASE_URL=$database_url POLICY_FILE=policy.yaml RUST_LOG=error \
  "$bin/backend" migrate
"$bin/bank-simulator" --listen 127.0.0.1:18081 >/dev/null 2>&1 & pids+=($!)
for _ in $(seq 1 100); do curl -sf "$bank/healthz" >/dev/null && break; sleep 0.1; done

unknown_backlog "$db" "$keys"

unknown() { sql_value "SELECT count(*) FROM idempotency_keys WHERE state = 'unknown'"; }
drain() { # concurrency lookups-per-second [policy]: keys per second
  APP_ENV=development DATABASE_URL=$database_url BANK_URL=$bank LISTEN_ADDR=127.0.0.1:18080 \
    ADMIN_ADDR=127.0.0.1:18082 POLICY_FILE=${3:-$rules_off} RUST_LOG=error \
    RECONCILE_CONCURRENCY=$1 RECONCILE_MAX_LOOKUPS_PER_SECOND=$2 "$bin/backend" serve \
    >/dev/null 2>&1 &
  local backend=$! started ended
  started=$(date +%s.%N)
  for _ in $(seq 1 6000); do [ "$(unknown)" = 0 ] && break; sleep 0.05; done
  ended=$(date +%s.%N)
  kill "$backend"; wait "$backend" || true
  [ "$(unknown)" = 0 ] || { echo "the backlog did not drain within 5 minutes" >&2; exit 1; }
  local done_keys
  done_keys=$(sql_value "SELECT count(*) FROM idempotency_keys WHERE state = 'done'")
  [ "$done_keys" = "$keys" ] || { echo "only $done_keys of $keys keys are done" >&2; exit 1; }
  check_money >&2
  awk -v k="$(backlog)" -v s="$started" -v e="$ended" -v c="$1" -v r="$2" \
    'BEGIN { printf "  concurrency %2d, cap %6d/s: %7.1f s, %7.0f keys/s\n", c, r, e - s, k / (e - s) }'
}
# The backlog again for the next run, its first `$1` keys (every key is `done` after a run):
# the bank keeps its debits.
again() {
  psql -q -h 127.0.0.1 -U postgres -d "$db" -c "BEGIN; \
    UPDATE idempotency_keys SET state = 'unknown', next_lookup_at = NULL, lease_owner = NULL, \
      lease_until = NULL, failed_lookups = 0, status_checks = 0, settlement_due_at = NULL \
      WHERE resource_id IN (SELECT payment_id FROM payments ORDER BY created_at LIMIT $1); \
    UPDATE payments SET status = 'pending', finished_at = NULL \
      WHERE payment_id IN (SELECT payment_id FROM payments ORDER BY created_at LIMIT $1); COMMIT;"
  echo "$1" > "$work_backlog"
}
work_backlog=$(mktemp)
echo "$keys" > "$work_backlog"
backlog() { cat "$work_backlog"; }
echo "draining $keys unknown keys (instant bank; time from the backend's start; checked after each run):"
drain 1 1000000
again "$keys"; drain 8 1000000
again "$keys"; drain 32 1000000
again "$keys"; drain 32 1000
again "$paced_keys"
echo "draining $paced_keys of them under the shipped policy's pace (20 status checks a second for the deployment):"
drain 32 1000 "$paced"
