#!/usr/bin/env bash
# How fast the bank's settlement file decides a backlog (issue 46): KEYS (default 20,000)
# payments whose replies were all lost, every key `unknown` and every debit held by the bank
# simulator, decided by `backend settle` with the file the simulator exports (GET /settlement),
# on a server-profile backend and PostgreSQL. Imports the file twice: the first import must
# resolve every line, the second (the same file again) must change nothing, every line "already
# final". Prints each import's time and lines a second, beside the time status checks at the
# shipped pace (20 a second for the whole deployment, policy.yaml) would take for the same keys;
# then checks that every key is `done` and the succeeded payments equal the bank's debits.
# Usage: bench/settle.sh [keys, default 20000]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source bench/lib.sh
keys=${1:-20000}
scripts/start-postgres.sh
cargo build -q --profile server -p backend -p bank-simulator --bins
bin=target/server

db=settle_$$
bank=http://127.0.0.1:18081
databases+=("$db")
psql -q -h 127.0.0.1 -U postgres -d postgres -c "CREATE DATABASE $db"
database_url="postgres://postgres@127.0.0.1:5432/$db?sslmode=disable"
APP_ENV=development DATABASE_URL=$database_url POLICY_FILE=policy.yaml RUST_LOG=error \
  "$bin/backend" migrate
"$bin/bank-simulator" --listen 127.0.0.1:18081 >/dev/null 2>&1 & pids+=($!)
for _ in $(seq 1 100); do curl -sf "$bank/healthz" >/dev/null && break; sleep 0.1; done
unknown_backlog "$db" "$keys"
file=$scratch/settlement.csv
curl -sf "$bank/settlement" >"$file"

# import EXPECTED NAME: runs `backend settle` on the file, fails unless its summary is EXPECTED,
# and prints its time as NAME's.
import() {
  local started ended summary
  started=$(date +%s.%N)
  summary=$(APP_ENV=development DATABASE_URL=$database_url POLICY_FILE=policy.yaml \
    RUST_LOG=error "$bin/backend" settle "$file")
  ended=$(date +%s.%N)
  [ "$summary" = "$1" ] || { echo "the import printed '$summary', not '$1'" >&2; exit 1; }
  awk -v s="$started" -v e="$ended" -v k="$keys" -v what="$2" \
    'BEGIN { printf "  %-28s %6.2f s, %8.0f lines/s\n", what, e - s, k / (e - s) }'
}
pace=$(awk '/^ *per_second:/ { print $2 }' policy.yaml)
echo "$keys unknown keys decided by the bank's settlement file ($(wc -l <"$file") lines with its header):"
import "resolved $keys, already final 0, mismatched 0, unknown references 0" "first import"
import "resolved 0, already final $keys, mismatched 0, unknown references 0" "the same file again"
awk -v k="$keys" -v p="$pace" 'BEGIN { printf "  status checks at the shipped pace (%d/s): %.0f s for the same keys\n", p, k / p }'
undecided=$(sql_value "SELECT count(*) FROM idempotency_keys WHERE state <> 'done'")
[ "$undecided" = 0 ] || { echo "$undecided keys are not done after the import" >&2; exit 1; }
check_money
