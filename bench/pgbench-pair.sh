#!/usr/bin/env bash
# Two pgbench scripts side by side in one run: pgbench (8 clients, prepared) on a scratch database
# with the migrations, bench/pgbench/A.sql against B.sql, alternating, ROUNDS times each, so the
# machine's drift falls on both. Prints each run's transactions per second and the ratio of the
# medians. Used by bench/trail.sh (what the audit trail costs) and for issue 29's NOTIFY:
#   bench/pgbench-pair.sh claim-and-outcome claim-and-outcome-notify-always
# A schema change is measured with A_MIGRATIONS_BEFORE=NAME: A then runs on a second database
# with only the migrations that sort before NAME (the schema before the change), B on the full
# one; e.g. the claim statements with numeric and with opaque user ids:
#   A_MIGRATIONS_BEFORE=20261210000001 bench/pgbench-pair.sh claim-and-outcome claim-and-outcome
# Usage: bench/pgbench-pair.sh A B [seconds per run, default 10] [rounds, default 3]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source bench/lib.sh
first=$1 second=$2 duration=${3:-10} rounds=${4:-3}
scripts/start-postgres.sh
command -v pgbench >/dev/null || { echo "pgbench is missing (Debian: postgresql-client)" >&2; exit 1; }

db=bench_pair_$$
migrated_database "$db"
# The seed article's table too, for seed-two-statements.sql.
psql -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres -d "$db" -f bench/pgbench/seed-table.sql
db_a=$db
if [ -n "${A_MIGRATIONS_BEFORE:-}" ]; then
  db_a=${db}_before
  migrated_database "$db_a" "$A_MIGRATIONS_BEFORE"
fi
a=() b=()
for round in $(seq 1 "$rounds"); do
  a+=("$(pgbench_tps "$db_a" "$first" "$duration")")
  b+=("$(pgbench_tps "$db" "$second" "$duration")")
  echo "round $round: $first ${a[-1]}/s, $second ${b[-1]}/s"
done
a_median=$(median "${a[@]}")
b_median=$(median "${b[@]}")
events=$(psql -h 127.0.0.1 -U postgres -d "$db" -Atc "SELECT count(*) FROM key_events")
payments=$(psql -h 127.0.0.1 -U postgres -d "$db" -Atc "SELECT count(*) FROM payments")
echo "medians: $first $a_median/s, $second $b_median/s"
awk -v a="$a_median" -v b="$b_median" -v x="$first" -v y="$second" 'BEGIN { printf "%s / %s: %.2f\n", x, y, a / b }'
echo "events written: $events for $payments payments"
