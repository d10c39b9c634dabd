#!/usr/bin/env bash
# What the audit trail costs a new-key payment at PostgreSQL, in one run, side by side: pgbench
# (8 clients, prepared) on a scratch database with the migrations, the claim and outcome as the
# backend sends them (each with its event: bench/pgbench/claim-and-outcome.sql) against the same
# two statements without the events (claim-and-outcome-without-trail.sql), alternating, ROUNDS
# times each, so the machine's drift falls on both. Prints each run's transactions per second
# and the ratio of the medians. Observations (replays, refusals) are written in batches off the
# request path and are not part of this cost.
# Usage: bench/trail.sh [seconds per run, default 10] [rounds, default 3]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source bench/lib.sh
duration=${1:-10}
rounds=${2:-3}
scripts/start-postgres.sh
command -v pgbench >/dev/null || { echo "pgbench is missing (Debian: postgresql-client)" >&2; exit 1; }

db=bench_trail_$$
databases+=("$db")
psql -q -h 127.0.0.1 -U postgres -d postgres -c "CREATE DATABASE $db"
for migration in migrations/*.sql; do
  psql -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres -d "$db" -f "$migration"
done
tps() { # script: transactions per second of bench/pgbench/SCRIPT.sql
  pgbench -h 127.0.0.1 -U postgres -n -M prepared -c 8 -j 2 -T "$duration" \
    -f "bench/pgbench/$1.sql" "$db" 2>/dev/null | awk '/^tps/ { print $3 }'
}
with=() without=()
for round in $(seq 1 "$rounds"); do
  with+=("$(tps claim-and-outcome)")
  without+=("$(tps claim-and-outcome-without-trail)")
  echo "round $round: with the trail ${with[-1]}/s, without ${without[-1]}/s"
done
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
with_median=$(median "${with[@]}")
without_median=$(median "${without[@]}")
events=$(psql -h 127.0.0.1 -U postgres -d "$db" -Atc "SELECT count(*) FROM key_events")
payments=$(psql -h 127.0.0.1 -U postgres -d "$db" -Atc "SELECT count(*) FROM payments")
echo "medians: with the trail $with_median/s, without $without_median/s"
awk -v a="$with_median" -v b="$without_median" 'BEGIN { printf "with / without: %.2f\n", a / b }'
echo "events written: $events for $payments payments"
