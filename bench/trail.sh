#!/usr/bin/env bash
# What the audit trail costs a new-key payment at PostgreSQL, in one run, side by side
# (bench/pgbench-pair.sh): the claim and outcome as the backend sends them (each with its event:
# bench/pgbench/claim-and-outcome.sql) against the same two statements without the events
# (claim-and-outcome-without-trail.sql). Observations (replays, refusals) are written in
# batches off the request path and are not part of this cost.
# Usage: bench/trail.sh [seconds per run, default 10] [rounds, default 3]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec bench/pgbench-pair.sh claim-and-outcome claim-and-outcome-without-trail "${1:-10}" "${2:-3}"
