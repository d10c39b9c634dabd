#!/usr/bin/env bash
# Issue 29: would the shapes docs/design.md names under "Not built: the key's outcome update"
# pay? Two scratch databases with the migrations; in the second, the keys' partial index
# `idempotency_keys_unfinished` (its predicate names the key's state, so the outcome's update of
# the key cannot be HOT) is dropped, a partial index on pending payments stands in for it, and
# the keys get room on their pages (fillfactor 80). pgbench (bench/lib.sh: 8 clients, prepared),
# alternating, ROUNDS times:
# - as is: the backend's own claim and outcome (bench/pgbench/claim-and-outcome.sql);
# - moved: the same statements on the second database (the index moved);
# - no key update: the second database without the key's update at the outcome
#   (bench/pgbench/shape-no-key-update.sql, an upper bound for that shape);
# - seed: the seed article's two statements (the baseline issue 29's aim of 0.8 is against).
# Prints each run, the medians, their ratios to "as is" and to the seed, and how many of each
# table's updates were HOT in the first two.
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
psql -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres -d "$as_is" -f bench/pgbench/seed-table.sql
psql -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres -d "$moved" <<'SQL'
DROP INDEX idempotency_keys_unfinished;
CREATE INDEX payments_pending ON payments (created_at) WHERE status = 'pending';
ALTER TABLE idempotency_keys SET (fillfactor = 80);
SQL
declare -A rates
for round in $(seq 1 "$rounds"); do
  for run in "as_is $as_is claim-and-outcome" "moved $moved claim-and-outcome" \
    "no_key_update $moved shape-no-key-update" "seed $as_is seed-two-statements"; do
    read -r name database script <<<"$run"
    rate=$(pgbench_tps "$database" "$script" "$duration")
    echo "round $round: $name $rate/s"
    rates[$name]+=" $rate"
  done
done
# shellcheck disable=SC2086 # each entry is a list of rates, one word each
as_is_median=$(median ${rates[as_is]}) seed_median=$(median ${rates[seed]})
for name in as_is moved no_key_update seed; do
  # shellcheck disable=SC2086
  awk -v name="$name" -v m="$(median ${rates[$name]})" -v a="$as_is_median" -v s="$seed_median" \
    'BEGIN { printf "%-14s median %6.0f/s   / as is %.2f   / seed %.2f\n", name, m, m / a, m / s }'
done
for database in "$as_is" "$moved"; do
  echo "$database: table, updates, of them HOT"
  psql -h 127.0.0.1 -U postgres -d "$database" -Atc \
    "SELECT relname, n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables
     WHERE relname IN ('idempotency_keys', 'payments') ORDER BY relname"
done
