#!/usr/bin/env bash
# Issue 29: how long a payment takes at a steady rate below capacity, on both stores. For each
# store, on a fresh stack (bench/lib.sh: instant bank simulator, server profile): the capacity
# for new-key payments and for replays (wrk, 16 connections, closed loop), then each at half and
# at 80% of its capacity with tools/steady-load (open loop: latency from when each request was
# due, so a stall counts against every request it delayed). Prints p50, p99, p99.9 and errors
# per run, the p99 / p50 ratio issue 29 aims at (<= 3 at half capacity, no errors), and ends
# each stack with the money check.
# Usage: bench/latency.sh [seconds per run, default 10]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source bench/lib.sh
duration=${1:-10}
need_wrk
scripts/start-postgres.sh
cargo build -q --profile server -p backend -p bank-simulator -p steady-load --bins
bin=target/server
results=$scratch/results

# steady_runs STORE: capacity, then the fixed-rate runs, on the stack just started.
steady_runs() {
  local store=$1 replay_key traffic capacity fraction rate report
  replay_key=$(finished_key)
  for traffic in new-key replay; do
    if [ "$traffic" = new-key ]; then
      capacity=$(wrk_run 16 "$duration" -s bench/new-key.lua "$api" | requests_per_second)
    else
      capacity=$(REPLAY_KEY=$replay_key wrk_run 16 "$duration" -s bench/replay.lua "$api" | requests_per_second)
    fi
    for fraction in 50 80; do
      rate=$(awk -v c="$capacity" -v f="$fraction" 'BEGIN { printf "%d", c * f / 100 }')
      sleep 2 # let the last run's backlog (the reconciler, the trail's queue) settle
      printf '%s %s %s %s ' "$store" "$traffic" "$fraction" "$capacity" >>"$results"
      # The first line is the figures; a run with errors adds its first error, shown here.
      report=$("$bin/steady-load" --api "$api" --token "$token" --rate "$rate" \
        --seconds "$duration" --traffic "$traffic" --replay-key "$replay_key")
      head -n 1 <<<"$report" >>"$results"
      tail -n +2 <<<"$report" | sed "s/^/$store $traffic at $fraction%: /" >&2
    done
  done
  check_money | sed "s/^/$store: /"
  stop_stack
}

DB_PARAMS=sslmode=disable start_stack latency_pg "$bin/backend" >/dev/null
steady_runs postgres
export STORE=sqlite
start_stack latency_sqlite "$bin/backend" >/dev/null
steady_runs sqlite

awk -v seconds="$duration" '
  BEGIN {
    printf "%s s per run; capacity from wrk (16 connections), then open loop at that share of it\n", seconds
    printf "%-9s %-8s %5s %9s %7s %7s %9s %9s %9s %9s %8s\n", "store", "traffic", "load", "capacity", "rate", "errors", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "p99/p50"
  }
  {
    # STORE TRAFFIC FRACTION CAPACITY rate R requests N errors E p50 A p99 B p99.9 C max D
    printf "%-9s %-8s %4s%% %9.0f %7s %7s %9s %9s %9s %9s %8.2f\n", $1, $2, $3, $4, $6, $10, $12, $14, $16, $18, $14 / $12
  }' "$results"
