#!/usr/bin/env bash
# What issue 27's observability costs: the backend before it (a baseline commit, built from a
# worktree) against the backend now, both logging at `info` as the container does (the access
# line per request goes to /dev/null, text), and now with the access line turned off
# (`RUST_LOG=info,access=warn`); new-key payments and replays of one finished key, wrk with 16
# connections, an instant bank, PostgreSQL; alternating, in one run, each stack ending with the
# money check. Histograms and the request span are always on now; the third run isolates the
# access line's share, the fourth adds traces exported over OTLP/HTTP to a receiver process (the
# harness's otlp-receiver, which keeps every span; the batch exporter's defaults, which drop
# spans when its queue is full rather than slow a request).
# Usage: bench/observability.sh [seconds per run, default 10] [rounds, default 3] [baseline commit,
# default b4b8edf: the last before issue 27; 2e64b48 is the last before traces]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source bench/lib.sh
duration=${1:-10}
rounds=${2:-3}
baseline=${3:-b4b8edf}
need_wrk
scripts/start-postgres.sh

# The baseline, built from a worktree (target/baseline-COMMIT; `git worktree remove` it when
# done) into a target folder of its own: sharing the current one, cargo took the baseline's
# build of a workspace crate for the current source's.
# A fixed folder per commit, kept, so a second run compiles nothing again.
worktree=$PWD/target/baseline-$baseline
[ -d "$worktree" ] || git worktree add -q --detach "$worktree" "$baseline"
CARGO_TARGET_DIR=$PWD/target/baseline-build cargo build -q --profile server \
  --manifest-path "$worktree/Cargo.toml" -p backend --bins
cp target/baseline-build/server/backend "$scratch/backend-baseline"
cargo build -q --profile server -p backend -p bank-simulator -p test-harness --bins
bin=target/server

# The trace receiver: binds a port of its own and says which on its first line.
"$bin/otlp-receiver" >"$scratch/otlp-receiver.out" & receiver_pid=$!
for _ in $(seq 1 100); do grep -q listening "$scratch/otlp-receiver.out" && break; sleep 0.1; done
otlp_endpoint=$(sed -n 's/^otlp receiver listening on //p' "$scratch/otlp-receiver.out")
[ -n "$otlp_endpoint" ] || { echo "the OTLP receiver did not start" >&2; exit 1; }
trap 'kill $receiver_pid 2>/dev/null || true; cleanup' EXIT

results=$scratch/results
runs() { # label backend: new-key and replay throughput
  local label=$1 backend=$2 replay_key
  start_stack "obs_$label" "$backend" >/dev/null
  replay_key=$(finished_key)
  echo "${label}_new_key $(wrk_run 16 "$duration" -s bench/new-key.lua "$api" | requests_per_second)" >>"$results"
  echo "${label}_replay $(REPLAY_KEY=$replay_key wrk_run 16 "$duration" -s bench/replay.lua "$api" | requests_per_second)" >>"$results"
  check_money | sed "s/^/$label: /"
  stop_stack
}
for round in $(seq 1 "$rounds"); do
  BACKEND_LOG=info runs before "$scratch/backend-baseline"
  BACKEND_LOG=info runs now "$bin/backend"
  BACKEND_LOG=info,access=warn runs now_quiet "$bin/backend"
  OTEL_EXPORTER_OTLP_ENDPOINT=$otlp_endpoint BACKEND_LOG=info runs now_traced "$bin/backend"
  echo "round $round done"
done

sort -k1,1 -k2,2n "$results" | awk -v seconds="$duration" -v baseline="$baseline" '
  { rate[$1, ++count[$1]] = $2 }
  function median(name) { return rate[name, int((count[name] + 1) / 2)] }
  END {
    printf "per second, median of %d runs of %s s (RUST_LOG=info):\n", count["before_new_key"], seconds
    printf "  %-46s %10s %10s\n", "", "new key", "replay"
    printf "  %-46s %10.0f %10.0f\n", "baseline " baseline, median("before_new_key"), median("before_replay")
    printf "  %-46s %10.0f %10.0f\n", "now: histograms, request span, access line", median("now_new_key"), median("now_replay")
    printf "  %-46s %10.0f %10.0f\n", "now, access line off (access=warn)", median("now_quiet_new_key"), median("now_quiet_replay")
    printf "  %-46s %10.0f %10.0f\n", "now, traces exported over OTLP", median("now_traced_new_key"), median("now_traced_replay")
    printf "ratios to the baseline: new key %.2f, replay %.2f; access line off: new key %.2f, replay %.2f\n",
      median("now_new_key") / median("before_new_key"), median("now_replay") / median("before_replay"),
      median("now_quiet_new_key") / median("before_new_key"), median("now_quiet_replay") / median("before_replay")
    printf "traces exported, ratio to now without: new key %.2f, replay %.2f\n",
      median("now_traced_new_key") / median("now_new_key"), median("now_traced_replay") / median("now_replay")
  }'
echo "spans the receiver kept: $(curl -sf "$otlp_endpoint/received")"
