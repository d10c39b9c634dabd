#!/usr/bin/env bash
# Issue 29: would moving the unfinished-work index from the keys to the payments pay? (a shape
# docs/design.md names under "Not built: the key's outcome update"). Two scratch databases with
# the migrations; in the second, the keys' partial index `idempotency_keys_unfinished` (its
# predicate names the key's state, so the outcome's update of the key cannot be HOT) is dropped,
# a partial index on pending payments stands in for it, and the keys get room on their pages
# (fillfactor 80). pgbench (bench/lib.sh: 8 clients, prepared) runs the backend's own claim and
# outcome (bench/pgbench/claim-and-outcome.sql) on each, alternating, ROUNDS times; prints each
# run, the medians, and how many of each table's updates were HOT.
# Usage: bench/unfinished-index-shape.sh [seconds per run, default 10] [rounds, default 3]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source bench/lib.sh
duration=${1:-10} rounds=${2:-3}
scripts/start-postgres.sh
command -v pgbench >/dev/null || { echo "pgbench is missing (Debian: postgresql-client)" >&2; exit 1; }
as_is=shape_as_is_$$ moved=shape_moved_$$
migrated_database "$as_is"
migrated_database "$moved"
psql -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres -d "$moved" <<'SQL'
DROP INDEX idempotency_keys_unfinished;
CREATE INDEX payments_pending ON payments (created_at) WHERE status = 'pending';
ALTER TABLE idempotency_keys SET (fillfactor = 80);
SQL
a=() b=()
for round in $(seq 1 "$rounds"); do
  a+=("$(pgbench_tps "$as_is" claim-and-outcome "$duration")")
  b+=("$(pgbench_tps "$moved" claim-and-outcome "$duration")")
  echo "round $round: as is ${a[-1]}/s, the index on pending payments ${b[-1]}/s"
done
awk -v a="$(median "${a[@]}")" -v b="$(median "${b[@]}")" \
  'BEGIN { printf "medians: as is %.0f/s, moved %.0f/s; moved / as is %.2f\n", a, b, b / a }'
for database in "$as_is" "$moved"; do
  echo "$database: table, updates, of them HOT"
  psql -h 127.0.0.1 -U postgres -d "$database" -Atc \
    "SELECT relname, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables
     WHERE relname IN ('idempotency_keys', 'payments') ORDER BY relname"
done
