#!/usr/bin/env bash
# Two backend binaries side by side in one run: each on a fresh stack (bench/lib.sh: instant
# bank simulator, a fresh PostgreSQL database, or a SQLite file with STORE=sqlite), new-key
# payments from wrk (16 connections), A then B, ROUNDS times, so the machine's drift falls on
# both. Prints each run's payments a second and the backend's and PostgreSQL's CPU per payment,
# the medians, and the ratios B / A; every stack ends with the money check. For a change to the
# backend: build the base into a copy first, e.g.
#   git stash && cargo build --profile server -p backend && cp target/server/backend /tmp/base \
#     && git stash pop && cargo build --profile server -p backend
#   bench/backend-pair.sh /tmp/base target/server/backend
# WHAT=replay runs replays of one finished key instead (bench/replay.lua), for a change to the
# replay path.
# Usage: [WHAT=new-key|replay] bench/backend-pair.sh A B [seconds per run, default 10] [rounds, default 3]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source bench/lib.sh
first=$(realpath "$1") second=$(realpath "$2") duration=${3:-10} rounds=${4:-3}
need_wrk
scripts/start-postgres.sh
cargo build -q --profile server -p bank-simulator -p backend --bins
bin=target/server
results=$scratch/results
: >"$results"
for round in $(seq 1 "$rounds"); do
  for side in a b; do
    binary=$first
    [ "$side" = b ] && binary=$second
    DB_PARAMS=sslmode=disable start_stack "pair_$side" "$binary" >/dev/null
    script=bench/new-key.lua
    if [ "${WHAT:-new-key}" = replay ]; then
      REPLAY_KEY=$(finished_key)
      export REPLAY_KEY
      script=bench/replay.lua
    fi
    counted_wrk_run "$side" 16 "$duration" -s "$script" "$api"
    check_money >/dev/null || { echo "money check failed on $binary" >&2; exit 1; }
    stop_stack
  done
  tail -n 4 "$results" | awk -v round="$round" '
    /_cpu / { cpu[substr($1, 1, 1)] = sprintf("backend %s us, PostgreSQL %s us", $2, $3); next }
    { rate[$1] = $2 }
    END { printf "round %s: A %.0f/s (%s), B %.0f/s (%s)\n", round, rate["a"], cpu["a"], rate["b"], cpu["b"] }'
done
awk '
  function median(list, n,   i, j, t) {
    for (i = 2; i <= n; i++) for (j = i; j > 1 && list[j - 1] > list[j]; j--) { t = list[j]; list[j] = list[j - 1]; list[j - 1] = t }
    return list[int((n + 1) / 2)]
  }
  /_cpu / { side = substr($1, 1, 1); nb[side]++; backend[side, nb[side]] = $2; pg[side, nb[side]] = $3; next }
  { nr[$1]++; rate[$1, nr[$1]] = $2 }
  END {
    for (s = 0; s < 2; s++) {
      side = s ? "b" : "a"
      for (i = 1; i <= nr[side]; i++) { r[i] = rate[side, i]; c[i] = backend[side, i]; p[i] = pg[side, i] }
      mr[side] = median(r, nr[side]); mc[side] = median(c, nr[side]); mp[side] = median(p, nr[side])
      printf "median %s: %.0f requests/s, backend %.1f us, PostgreSQL %.1f us per request\n", toupper(side), mr[side], mc[side], mp[side]
    }
    printf "B / A: requests/s %.2f, backend CPU per request %.2f", mr["b"] / mr["a"], mc["b"] / mc["a"]
    # On SQLite the database is the backend'"'"'s own: no PostgreSQL CPU to compare.
    if (mp["a"] > 0) printf ", PostgreSQL CPU per request %.2f", mp["b"] / mp["a"]
    printf "\n"
  }' "$results"
