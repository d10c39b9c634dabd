#!/usr/bin/env bash
# Load run: throughput of new-key payments and of replays against a release backend with an
# instant bank simulator, side by side with GET /healthz (no database) as the ceiling, in one run.
# Usage: bench/load.sh [seconds per run, default 10] [connections, default 16]
# Needs wrk (installed if missing). Everything binds 127.0.0.1.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source bench/lib.sh
duration=${1:-10}
connections=${2:-16}
need_wrk
scripts/start-postgres.sh
cargo build -q --profile server -p backend -p bank-simulator --bins
bin=target/server
start_stack load_bench "$bin/backend"

REPLAY_KEY=$(finished_key)
export REPLAY_KEY

run() { # name, then wrk arguments; prints "name requests/s"
  local name=$1; shift
  printf '%s %s\n' "$name" "$(wrk_run "$connections" "$duration" "$@" | requests_per_second)"
}
results=$(
  run healthz "$api/healthz"
  run replay -s bench/replay.lua "$api"
  run new_key -s bench/new-key.lua "$api"
)
echo "$results" | awk -v conns="$connections" '
  { rps[$1] = $2; order[NR] = $1 }
  END {
    printf "%-34s %12s %10s\n", "run (" conns " connections)", "requests/s", "vs healthz"
    for (i = 1; i <= NR; i++) { n = order[i]; printf "%-34s %12.0f %10.3f\n", n, rps[n], rps[n] / rps["healthz"] }
  }'
# wrk closes its connections mid-request at the end; the server finishes that work regardless.
check_money
