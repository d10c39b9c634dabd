#!/usr/bin/env bash
# Issue 29: is the new-key tail at half capacity the disk's commit flush? The same stack
# (bench/lib.sh: instant bank simulator, a fresh PostgreSQL database) with the backend's
# connections as deployed and with `synchronous_commit=off` set on them through DATABASE_URL,
# alternating, ROUNDS times: a 5 s wrk warm-up, then new-key payments at RATE a second for
# SECONDS (tools/steady-load, open loop), and PostgreSQL's WAL syncs per payment from
# pg_stat_wal (showing the setting took). A diagnosis only: with the flush off a crash can lose
# a claim the backend already acted on, which a payment system cannot allow.
# Usage: bench/commit-flush-tail.sh [rate a second, default 1700] [seconds, default 10] [rounds, default 3]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source bench/lib.sh
rate=${1:-1700} duration=${2:-10} rounds=${3:-3}
need_wrk
scripts/start-postgres.sh
cargo build -q --profile server -p backend -p bank-simulator -p steady-load --bins
bin=target/server
wal_syncs() { psql -qtA -h 127.0.0.1 -U postgres -d postgres -c "SELECT wal_sync FROM pg_stat_wal"; }
for round in $(seq 1 "$rounds"); do
  for flush in on off; do
    params=sslmode=disable
    [ "$flush" = off ] && params="sslmode=disable&options=-c%20synchronous_commit%3Doff"
    DB_PARAMS=$params start_stack "flush_$flush" "$bin/backend" >/dev/null
    wrk_run 16 5 -s bench/new-key.lua "$api" >/dev/null
    syncs_before=$(wal_syncs)
    report=$("$bin/steady-load" --api "$api" --token "$token" --rate "$rate" \
      --seconds "$duration" --traffic new-key)
    syncs=$(($(wal_syncs) - syncs_before))
    check_money
    stop_stack
    awk -v round="$round" -v flush="$flush" -v syncs="$syncs" 'NR == 1 {
      printf "round %s, synchronous_commit %-3s: %s requests, %s errors, p50 %s ms, p99 %s ms, p99.9 %s ms, p99/p50 %.2f, WAL syncs a payment %.2f\n",
        round, flush, $4, $6, $8, $10, $12, $10 / $8, syncs / $4 }' <<<"$report"
  done
done
