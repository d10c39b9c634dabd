#!/usr/bin/env bash
# What the backend's load limits cost and what they buy (issue 12), in one run:
# 1. Cost: new-key payments per second with an instant bank and 16 connections: the backend
#    from before the limits (commit 773460c, built once into target/limits-before), today's with
#    plaintext to the local PostgreSQL (as before), and today's with the URL's default sslmode
#    (`prefer`: TLS to the local PostgreSQL, which has ssl on), alternated twice; ratios of means.
# 2. Effect: overloads against a bank that takes 100 ms, OVERLOAD_CONNECTIONS clients at once
#    (default "512 1024"; MAX_CONCURRENT_REQUESTS is 256), before and after, with the bank bound
#    raised to 512 so the request limit is what sheds; then once at the default bank bound (64),
#    which caps payments at 64 / 100 ms = 640 a second. wrk ignores Retry-After, so this is a
#    client that does not back off: requests/s, non-2xx replies (the shed 503s), socket
#    errors, p99.
# Every run ends with the money check: the bank's debits equal the succeeded payments.
# Usage: bench/limits.sh [seconds per run, default 8]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source bench/lib.sh
duration=${1:-8}
before_commit=773460c
need_wrk
scripts/start-postgres.sh
cargo build -q --profile server -p backend -p bank-simulator --bins
bin=target/server
before=target/limits-before/server/backend
if [ ! -x "$before" ]; then
  worktree=$(mktemp -d)
  git worktree add -q --detach "$worktree" "$before_commit"
  CARGO_TARGET_DIR=$PWD/target/limits-before cargo build -q --profile server -p backend \
    --bin backend --manifest-path "$worktree/Cargo.toml"
  git worktree remove --force "$worktree"
fi

throughput() { # label binary database-url-parameters: new-key payments per second
  DB_PARAMS=$3 start_stack "limits_$1" "$2" >/dev/null
  printf '%s %s\n' "$1" "$(wrk_run 16 "$duration" -s bench/new-key.lua "$api" | requests_per_second)"
  check_money >&2
  stop_stack
}
results=$(
  for _ in 1 2; do
    throughput before "$before" sslmode=disable
    throughput after "$bin/backend" sslmode=disable
    throughput after_tls_db "$bin/backend" ""
  done
)
echo "new-key payments, instant bank, 16 connections, ${duration} s per run:"
echo "$results" | awk '
  { sum[$1] += $2; n[$1]++; printf "  %-13s %8.0f requests/s\n", $1, $2 }
  END {
    base = sum["before"] / n["before"]
    printf "  after / before:        %.3f\n", (sum["after"] / n["after"]) / base
    printf "  after_tls_db / before: %.3f\n", (sum["after_tls_db"] / n["after_tls_db"]) / base
  }'

overload() { # label binary connections
  DB_PARAMS=sslmode=disable start_stack "overload_$1" "$2" --latency-ms 100 >/dev/null
  echo "overload, $1 ($3 connections, bank 100 ms, bank bound ${MAX_BANK_CALLS:-none}, ${duration} s):"
  wrk_run "$3" "$duration" --latency -s bench/new-key.lua "$api" \
    | grep -E 'requests in|Requests/sec|Non-2xx|Socket errors|^ +99%' | sed 's/^ */  /'
  check_money | sed 's/^/  /'
  stop_stack
}
for connections in ${OVERLOAD_CONNECTIONS:-512 1024}; do
  overload before "$before" "$connections"
  MAX_BANK_CALLS=512 overload after "$bin/backend" "$connections"
done
MAX_BANK_CALLS=64 overload after "$bin/backend" 512
