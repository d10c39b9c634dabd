#!/usr/bin/env bash
# What a new-key payment writes to PostgreSQL's write-ahead log, by record type, against the
# seed article's two statements, in one run (issue 29: the statements' limit against the
# seed's). Each pgbench script (bench/pgbench/) runs on a scratch database with the migrations
# (8 clients, prepared; a warm-up run first, so the tables have rows), and pg_walinspect's
# pg_get_wal_stats reads the WAL between the measured run's two positions: records and bytes per
# payment (one script run) of each type. Nothing else should write to the server meanwhile.
# Usage: bench/wal.sh [seconds per run, default 5] [script...] (default: claim-and-outcome and
# seed-two-statements)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source bench/lib.sh
duration=${1:-5}
shift || true
[ $# -gt 0 ] || set -- claim-and-outcome seed-two-statements
scripts/start-postgres.sh
command -v pgbench >/dev/null || { echo "pgbench is missing (Debian: postgresql-client)" >&2; exit 1; }

db=bench_wal_$$
migrated_database "$db"
psql -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres -d "$db" -f bench/pgbench/seed-table.sql
psql -q -h 127.0.0.1 -U postgres -d "$db" -c "CREATE EXTENSION IF NOT EXISTS pg_walinspect"
wal_position() { psql -h 127.0.0.1 -U postgres -d "$db" -Atc "SELECT pg_current_wal_lsn()"; }
for script in "$@"; do
  pgbench_tps "$db" "$script" "$duration" >/dev/null
  start=$(wal_position)
  report=$(pgbench_report "$db" "$script" "$duration")
  end=$(wal_position)
  runs=$(awk '/number of transactions actually processed/ { print $6 }' <<<"$report")
  tps=$(awk '/^tps/ { printf "%.0f", $3 }' <<<"$report")
  echo "== $script: $runs payments ($tps a second); WAL per payment, by record type"
  psql -h 127.0.0.1 -U postgres -d "$db" -AF ' | ' -c "
    SELECT \"resource_manager/record_type\" AS record,
           round(count::numeric / $runs, 2) AS records,
           round(combined_size::numeric / $runs) AS bytes,
           round(fpi_size::numeric / $runs) AS of_it_page_images
    FROM pg_get_wal_stats('$start', '$end', true)
    WHERE count::numeric / $runs >= 0.01 ORDER BY combined_size DESC" | sed '$d'
  psql -h 127.0.0.1 -U postgres -d "$db" -Atc "
    SELECT 'all: ' || round(sum(count)::numeric / $runs, 2) || ' records, '
           || round(sum(combined_size)::numeric / $runs) || ' bytes'
    FROM pg_get_wal_stats('$start', '$end', false)"
done
