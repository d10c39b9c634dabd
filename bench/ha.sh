#!/usr/bin/env bash
# What synchronous replication costs a new payment: the backend (server profile, instant bank,
# wrk with 16 connections) paying new-key payments on the machine's one PostgreSQL server and on
# a three-node Patroni cluster with synchronous replication behind HAProxy
# (scripts/ha-cluster.sh), alternating, in one run; each stack ends with the money check.
# Everything shares the machine's 2 cores, the cluster's three servers included, so the ratio
# counts the standbys' CPU as well as the wait for their flush.
# Usage: bench/ha.sh [seconds per run, default 10] [rounds, default 3]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source bench/lib.sh
duration=${1:-10}
rounds=${2:-3}
need_wrk
scripts/start-postgres.sh
cargo build -q --profile server -p backend -p bank-simulator --bins
bin=target/server

# The cluster's folder: one the postgres user can enter (the scratch folder is private).
export HA_DIR=/tmp/bench-ha-$$ HA_PORT_BASE=15730
trap 'cleanup; scripts/ha-cluster.sh down >/dev/null 2>&1 || true' EXIT
cluster_port=$(scripts/ha-cluster.sh up | tail -n 1 | sed -E 's#.*127\.0\.0\.1:([0-9]+)/.*#\1#')

results=$scratch/results
new_key_run() { # label: new-key payments per second on the stack just started
  echo "$1 $(wrk_run 16 "$duration" -s bench/new-key.lua "$api" | requests_per_second)" >>"$results"
  check_money | sed "s/^/$1: /"
  stop_stack
}
for round in $(seq 1 "$rounds"); do
  DB_PARAMS=sslmode=disable start_stack ha_single "$bin/backend" >/dev/null
  new_key_run single
  DB_PORT=$cluster_port DB_PARAMS=sslmode=disable DATABASE_REPLICATION=synchronous \
    start_stack ha_cluster "$bin/backend" >/dev/null
  new_key_run cluster
  echo "round $round done"
done

sort -k1,1 -k2,2n "$results" | awk -v seconds="$duration" '
  { rate[$1, ++count[$1]] = $2 }
  function median(name) { return rate[name, int((count[name] + 1) / 2)] }
  END {
    printf "new-key payments per second, median of %d runs of %s s:\n", count["single"], seconds
    printf "  %-44s %8.0f\n", "one PostgreSQL server", median("single")
    printf "  %-44s %8.0f\n", "Patroni cluster, synchronous, through HAProxy", median("cluster")
    printf "ratio cluster / single server: %.2f\n", median("cluster") / median("single")
  }'
