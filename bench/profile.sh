#!/usr/bin/env bash
# Issue 29: where the backend's CPU goes per new-key payment (or per replay), grouped by
# subsystem. Builds the server profile with frame pointers and line tables into its own target
# directory, starts the usual stack (bench/lib.sh: instant bank simulator, PostgreSQL or
# STORE=sqlite), and samples the backend with `perf record -g` during a wrk run. Prints the
# backend's CPU per request from /proc, then each subsystem's share of the backend's samples: a
# sample counts for the innermost frame that names a subsystem (bench/profile_groups.py), so a
# share of the CPU per request turns into microseconds.
# healthz profiles `GET /healthz`, the server with none of the API's work: the baseline a replay
# is compared with (issue 29: a replay's CPU at most 1.5x healthz's).
# Usage: bench/profile.sh [new-key|replay|healthz] [seconds, default 10]
# The raw profile stays in target/profiling/perf.data (`perf report -i ...` to browse it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source bench/lib.sh
what=${1:-new-key}
duration=${2:-10}
need_wrk
command -v perf >/dev/null || { echo "perf is missing (Debian: linux-perf)" >&2; exit 1; }
scripts/start-postgres.sh
RUSTFLAGS="-C force-frame-pointers=yes" CARGO_PROFILE_SERVER_DEBUG=line-tables-only \
  CARGO_PROFILE_SERVER_STRIP=none \
  cargo build -q --profile server --target-dir target/profiling -p backend -p bank-simulator --bins
bin=target/profiling/server
results=$scratch/results
DB_PARAMS=sslmode=disable start_stack profile "$bin/backend" >/dev/null
case $what in
  new-key) script=(-s bench/new-key.lua) ;;
  replay)
    replay_key=$(finished_key)
    export REPLAY_KEY=$replay_key
    script=(-s bench/replay.lua)
    ;;
  healthz) script=() ;;
  *) echo "usage: bench/profile.sh [new-key|replay|healthz] [seconds]" >&2; exit 2 ;;
esac
target=$api
[ "$what" = healthz ] && target=$api/healthz
profile=target/profiling/perf.data
perf record -q -F 999 -g -p "$backend_pid" -o "$profile" -- sleep "$duration" 2>/dev/null &
recording=$!
counted_wrk_run "$what" 16 "$duration" "${script[@]}" "$target"
wait "$recording" || true
check_money
awk '/_cpu / { printf "backend CPU per request: %s us (PostgreSQL %s, bank %s, wrk %s)\n", $2, $3, $4, $5; next }
     { printf "%s: %s requests a second\n", $1, $2 }' "$results"

# One line per sample: its weight, then its frames' symbols innermost first, `;`-separated.
perf script -i "$profile" -F period,ip,sym,dso 2>/dev/null | awk '
  /^ *[0-9]+ *$/ { if (frames != "") print weight "\t" frames; weight = $1; frames = ""; next }
  NF { sub(/^[ \t]*[0-9a-f]+ /, ""); frames = frames (frames == "" ? "" : ";") $0 }
  END { if (frames != "") print weight "\t" frames }' >"$scratch/samples"
python3 bench/profile_groups.py "$scratch/samples"
