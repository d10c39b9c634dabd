#!/usr/bin/env bash
# The chaos soak (tools/soak): rule-following clients through the edge Worker (workerd) and three
# backend replicas behind HAProxy on one PostgreSQL database, against the bank simulator, while a
# seeded fault schedule kills and restarts replicas, cuts database connections, restarts
# PostgreSQL once, makes the bank slow, forgetful, failing, declining or absent, and restarts the
# edge; then an audit of every record against the bank's ledger. Exit 0 if every promise held,
# 1 on a violation (each named, with the events around it), 2 if the soak itself could not run.
#
#   scripts/soak.sh                                   # 5 minutes on PostgreSQL, seed 1
#   scripts/soak.sh --database sqlite                 # one replica on a SQLite file
#   scripts/soak.sh --database ha                     # on a Patroni cluster, its leader killed...
#   scripts/soak.sh --duration-seconds 60 --seed 7    # the test command's profile, another seed
#   scripts/soak.sh --client key-per-retry            # a client that charges twice: the audit fails
#   scripts/soak.sh --database ha --ha-replication asynchronous --cluster-faults lose-the-tail
#                                                     # a cluster that loses commits: the audit fails
#   scripts/soak.sh --database ha --network namespaces --duration-seconds 90
#                                                     # the cluster, the bank and 2 replicas in
#                                                     # network namespaces, partitioned: the
#                                                     # leader cut off, a split brain, the sync
#                                                     # standby cut, a lossy and a slow database
#                                                     # link, the bank's link cut mid-call (the
#                                                     # test command's profile, 4.5 min)
#   scripts/soak.sh --database ha --network namespaces --ha-replication asynchronous \
#     --cluster-faults isolate-leader --other-faults false
#                                                     # a cut-off leader acknowledges payments
#                                                     # it alone holds: the audit fails
#
# Every flag goes to the soak (`target/debug/soak --help`). On PostgreSQL it restarts the
# machine's server once: run nothing else against it meanwhile. `--database ha` starts its own
# cluster (scripts/ha-cluster.sh, ports from 15630; with `--network namespaces`, namespaces
# paysoak-* on 10.233.0.0/24) and takes it down at the end.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/setup-tools.sh >/dev/null
scripts/start-postgres.sh
cargo build -q -p backend -p bank-simulator -p soak --bins
# The packet delayer of the namespaces' slow-db-link (built here, not mid-soak).
cargo build -q -p test-harness --bin nfqueue-delay
[ -f edge/build/index.js ] && [ -f edge/build/index_bg.wasm ] || scripts/build-edge.sh
exec target/debug/soak "$@"
