#!/usr/bin/env bash
# Loads 400,000 finished keys into the article's schema and into ours, in one scratch database,
# with their payments and audit trails, and prints the sizes (pg_total_relation_size); then two
# trail layouts the schema does not use, for comparison (bench/trail-layouts.sql).
# Usage: bench/storage.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source bench/lib.sh
scripts/start-postgres.sh
db=storage_bench_$$
migrated_database "$db"
psql -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres -d "$db" -f bench/storage.sql
psql -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres -d "$db" -f bench/trail-layouts.sql
