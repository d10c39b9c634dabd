#!/usr/bin/env bash
# The backend's CPU per replay against its CPU per `GET /healthz` at one fixed rate (issue 29's
# replay / healthz aim), beside the closed-loop figure `bench/perf.sh` gives. wrk runs each at
# the server's limit, where a slower reply also changes how often each side sleeps and is woken;
# here both are sent at the same rate by tools/steady-load (open loop), so the two runs differ
# only in what the backend does per request. One stack (bench/lib.sh: instant bank simulator,
# PostgreSQL), one finished key, then healthz and replays alternating, ROUNDS times; the
# backend's CPU is read from /proc before and after each run. Prints each run and the ratio of
# the medians.
# Usage: bench/fixed-rate-cpu.sh [rate a second, default 8000] [seconds, default 10] [rounds, default 3]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source bench/lib.sh
rate=${1:-8000} duration=${2:-10} rounds=${3:-3}
scripts/start-postgres.sh
cargo build -q --profile server -p backend -p bank-simulator -p steady-load --bins
bin=target/server
DB_PARAMS=sslmode=disable start_stack fixed_rate "$bin/backend" >/dev/null
replay_key=$(finished_key)
ticks_per_second=$(getconf CLK_TCK)
declare -A cpu=()
for round in $(seq 1 "$rounds"); do
  for traffic in healthz replay; do
    before=$(cpu_ticks "$backend_pid")
    report=$("$bin/steady-load" --api "$api" --token "$token" --rate "$rate" \
      --seconds "$duration" --traffic "$traffic" --replay-key "$replay_key")
    after=$(cpu_ticks "$backend_pid")
    requests=$(awk 'NR == 1 { print $4 }' <<<"$report")
    errors=$(awk 'NR == 1 { print $6 }' <<<"$report")
    micros=$(awk -v t=$((after - before)) -v hz="$ticks_per_second" -v n="$requests" \
      'BEGIN { printf "%.1f", t / hz * 1e6 / n }')
    cpu[$traffic]+="$micros "
    echo "round $round: $traffic at $rate a second: $requests requests, $errors errors, backend $micros us each"
  done
done
check_money
# shellcheck disable=SC2086 # the lists are words
healthz=$(median ${cpu[healthz]}) replay=$(median ${cpu[replay]})
awk -v h="$healthz" -v r="$replay" -v rate="$rate" 'BEGIN {
  printf "medians at %s a second: healthz %.1f us, replay %.1f us; replay / healthz %.2f (aim <= 1.5)\n", rate, h, r, r / h }'
