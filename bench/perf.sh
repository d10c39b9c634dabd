#!/usr/bin/env bash
# Issues 15 and 29: throughput and CPU figures in one run, side by side (compare ratios: on this
# shared 2-core machine absolute numbers move by a quarter between runs):
# 1. PostgreSQL's limits on the project's own statements (pgbench, 8 clients, prepared, on a
#    scratch database): a new-key payment's claim and outcome as written now (one statement
#    each), as before that (the outcome as BEGIN, two UPDATEs, NOTIFY, COMMIT) and with the
#    NOTIFY sent on every payment rather than only when a request waits; the seed article's
#    two statements on its own table (the baseline the safety and audit features are measured
#    against); the replay read.
# 2. The backend (server profile, instant bank simulator, wrk with 16 connections): new-key
#    payments and replays of one finished key, on PostgreSQL with the replay cache, on
#    PostgreSQL without it (REPLAY_CACHE_MAX_BYTES=0), and on SQLite; GET /healthz (no
#    database) as the HTTP ceiling. Each wrk run also prints the CPU per request of the backend,
#    PostgreSQL (the whole server), the bank simulator and wrk, read from /proc before and after
#    (bench/lib.sh). Every stack ends with the money check: the bank's debits equal the
#    succeeded payments, and no key is left unfinished.
# 3. The ratios the issue aims at.
# Usage: bench/perf.sh [seconds per run, default 10]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source bench/lib.sh
duration=${1:-10}
need_wrk
scripts/start-postgres.sh
command -v pgbench >/dev/null || { echo "pgbench is missing (Debian: postgresql-client)" >&2; exit 1; }
cargo build -q --profile server -p backend -p bank-simulator --bins
bin=target/server

limits_db=perf_limits_$$
migrated_database "$limits_db"
psql -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres -d "$limits_db" -f bench/pgbench/replay-keys.sql
psql -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres -d "$limits_db" -f bench/pgbench/seed-table.sql
results=$scratch/results
{
  echo "pg_limit_new_key $(pgbench_tps "$limits_db" claim-and-outcome "$duration")"
  echo "pg_limit_new_key_before $(pgbench_tps "$limits_db" claim-and-outcome-before "$duration")"
  echo "pg_limit_new_key_notify_always $(pgbench_tps "$limits_db" claim-and-outcome-notify-always "$duration")"
  echo "pg_limit_seed $(pgbench_tps "$limits_db" seed-two-statements "$duration")"
  echo "pg_limit_replay_read $(pgbench_tps "$limits_db" replay-read "$duration")"
} >"$results"

backend_runs() { # label: new-key and replay throughput of the stack just started
  local replay_key
  replay_key=$(finished_key)
  counted_wrk_run "${1}_new_key" 16 "$duration" -s bench/new-key.lua "$api"
  REPLAY_KEY=$replay_key counted_wrk_run "${1}_replay" 16 "$duration" -s bench/replay.lua "$api"
  check_money | sed "s/^/$1: /"
  stop_stack
}
DB_PARAMS=sslmode=disable start_stack perf_pg "$bin/backend" >/dev/null
counted_wrk_run healthz 16 "$duration" "$api/healthz"
backend_runs pg
DB_PARAMS=sslmode=disable REPLAY_CACHE_MAX_BYTES=0 start_stack perf_pg_nocache "$bin/backend" >/dev/null
backend_runs pg_no_cache
export STORE=sqlite
start_stack perf_sqlite "$bin/backend" >/dev/null
backend_runs sqlite

awk -v seconds="$duration" '
  /_cpu / { name = substr($1, 1, length($1) - 4); backend[name] = $2; postgres[name] = $3; bank[name] = $4; wrk[name] = $5; next }
  { rate[$1] = $2; order[++runs] = $1 }
  function ratio(name, a, b, aim) {
    printf "  %-58s %6.2f   (aim %s)\n", name, rate[a] / rate[b], aim
  }
  function cpu_ratio(name, a, b, aim) {
    printf "  %-58s %6.2f   (aim %s)\n", name, a / b, aim
  }
  END {
    printf "per second, %s s per run (pgbench 8 clients; wrk 16 connections, instant bank),\n", seconds
    print "and for the wrk runs the CPU per request (microseconds) of each process:"
    printf "  %-30s %10s %9s %9s %9s %9s\n", "", "per s", "backend", "postgres", "bank", "wrk"
    for (i = 1; i <= runs; i++) {
      name = order[i]
      if (name in backend)
        printf "  %-30s %10.0f %9.1f %9.1f %9.1f %9.1f\n", name, rate[name], backend[name], postgres[name], bank[name], wrk[name]
      else
        printf "  %-30s %10.0f\n", name, rate[name]
    }
    print "ratios:"
    cpu_ratio("backend CPU per PostgreSQL new-key payment / PostgreSQL CPU", backend["pg_new_key"], postgres["pg_new_key"], "<= 0.25")
    cpu_ratio("backend CPU per PostgreSQL replay / per healthz", backend["pg_replay"], backend["healthz"], "<= 1.5")
    ratio("PostgreSQL limit, the backend statements / the seed two", "pg_limit_new_key", "pg_limit_seed", ">= 0.8")
    ratio("PostgreSQL new-key limit, NOTIFY only when awaited / always", "pg_limit_new_key", "pg_limit_new_key_notify_always", "> 1")
    ratio("PostgreSQL new-key limit, one-statement outcome / before", "pg_limit_new_key", "pg_limit_new_key_before", "> 1")
    ratio("backend PostgreSQL new-key / its statements limit", "pg_new_key", "pg_limit_new_key", ">= 0.8")
    ratio("backend PostgreSQL replays / the replay read limit", "pg_replay", "pg_limit_replay_read", ">= 2")
    ratio("backend PostgreSQL replays, cache / no cache", "pg_replay", "pg_no_cache_replay", "> 1")
    ratio("backend SQLite new-key / PostgreSQL new-key", "sqlite_new_key", "pg_new_key", ">= 1")
    ratio("backend SQLite replays / PostgreSQL replays", "sqlite_replay", "pg_replay", ">= 1")
    ratio("backend PostgreSQL replays / healthz (the HTTP ceiling)", "pg_replay", "healthz", "-")
  }' "$results"
