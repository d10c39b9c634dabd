#!/usr/bin/env bash
# Reruns the article's bill-payments night against the real stack, prints the side-by-side
# table and draws the night's chart (docs/images/incident-night.svg, the README's): starts
# PostgreSQL if needed, creates a fresh database, starts the bank simulator and two backends on
# it (the shipped policy, and one whose policy has `required_for: []` for the no-key client,
# which the shipped policy would refuse with 400), then runs `incident-replay`.
# Everything listens on 127.0.0.1 on free ports and is stopped when the script ends.
#
#   scripts/incident-replay.sh                                   # 200 customers, seed 7, 1 s = 10 ms
#   scripts/incident-replay.sh --customers 50 --seed 3 --time-scale 20 --chart /tmp/night.svg
#   AUTH_JWT_SECRET=<the edge's> scripts/incident-replay.sh --api http://127.0.0.1:8787 \
#       --backend-addr 127.0.0.1:8080
#
# Without --api, clients (b), (c) and (d) talk to the backend directly (no edge in the path).
# With --api, they go through that URL (the edge Worker under `wrangler dev`), which must forward
# to this script's backend (hence --backend-addr on the port its BACKEND_URL names) and share its
# token secret (AUTH_JWT_SECRET). --chart PATH (or REPLAY_CHART) writes the chart elsewhere.
# Every other flag goes to incident-replay (`--help` lists them).
# KEEP_DB=1 keeps the database for inspection.
#
# --rail npci (the default) runs the backend under NPCI's status-check rules scaled to the night's
# clock (the first check 90 s of the night after the call, at most 3 within 2 hours of it, 20 a
# night-second; no quiet hours, the night's clock not being the wall's), against a bank that
# refuses any check breaking them. --rail off runs it with the rules off (the first check at
# once, 12 checks, no pace): the look-ups this backend made before the rules, against the same
# refusing bank. Either way the bank's counts of status checks are printed at the end.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

api="" backend_addr=127.0.0.1:0 time_scale=10 rail=npci chart=${REPLAY_CHART:-docs/images/incident-night.svg} pass=()
while [ $# -gt 0 ]; do
  case "$1" in
    --api) api=$2; shift 2 ;;
    --api=*) api=${1#*=}; shift ;;
    --backend-addr) backend_addr=$2; shift 2 ;;
    --backend-addr=*) backend_addr=${1#*=}; shift ;;
    --rail) rail=$2; shift 2 ;;
    --rail=*) rail=${1#*=}; shift ;;
    --chart) chart=$2; shift 2 ;;
    --chart=*) chart=${1#*=}; shift ;;
    --time-scale) time_scale=$2; pass+=("$1" "$2"); shift 2 ;;
    --time-scale=*) time_scale=${1#*=}; pass+=("$1"); shift ;;
    *) pass+=("$1"); shift ;;
  esac
done

scripts/start-postgres.sh
cargo build -q -p backend -p bank-simulator --bins
cargo build -q -p incident-replay
# Where cargo put them (CARGO_TARGET_DIR when set).
bin=${CARGO_TARGET_DIR:-target}/debug

admin_url=postgres://postgres@127.0.0.1:5432/postgres
db=incident_replay_$(date +%s)_$$
db_url=postgres://postgres@127.0.0.1:5432/$db
work=$(mktemp -d)
pids=()
cleanup() {
  trap - EXIT
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  if [ "${KEEP_DB:-0}" = 1 ]; then
    echo "kept the database: $db_url" >&2
  else
    psql -q "$admin_url" -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
psql -q "$admin_url" -c "CREATE DATABASE $db"

secret=${AUTH_JWT_SECRET:-incident-replay-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')}
# The backend waits 30 s of the night for the bank: past the bank's worst latency (20 s + 4 s
# jitter), short of a lost reply's 60 s, so a lost reply leaves the key `unknown` for the
# reconciler, as a real timeout would.
bank_timeout_ms=$(awk -v scale="$time_scale" 'BEGIN { printf "%d", 30 * scale }')
# The rail's rules on the night's clock (`time_scale` ms a night-second): NPCI's 90 s, 2 hours and
# 20 a second scaled, and `stuck_after` with them (the last check may not come before it).
scaled() { awk -v night="$1" -v scale="$time_scale" -v unit="$2" 'BEGIN { v = night * scale / 1000 / unit; printf "%d", (v == int(v) || v < 1) ? (v < 1 ? 1 : v) : int(v) + 1 }'; }
case "$rail" in
  npci) first_after=$(scaled 90 1) at_most=3 within=$(scaled 7200 60) stuck=$(scaled 300 60)
        per_second=$(awk -v scale="$time_scale" 'BEGIN { printf "%d", 20 * 1000 / scale }') ;;
  off) first_after=0 at_most=12 within=10 stuck=1 per_second=100000 ;;
  *) echo "incident-replay.sh: --rail is npci or off, not $rail" >&2; exit 2 ;;
esac
[ "$within" -ge "$stuck" ] || within=$stuck
sed -E -e "s/^( *stuck_after_minutes:).*/\1 $stuck/" -e "s/^( *first_after_seconds:).*/\1 $first_after/" \
  -e "s/^( *at_most:).*/\1 $at_most/" -e "s/^( *within_minutes:).*/\1 $within/" \
  -e "s/^( *per_second:).*/\1 $per_second/" -e "s/^( *quiet_hours:).*/\1 []/" policy.yaml > "$work/policy.yaml"
sed -E 's/^( *required_for:).*/\1 []/' "$work/policy.yaml" > "$work/policy-no-key.yaml"
# The bank refuses a check sooner than 90 s of the night after its call, or a fourth.
bank_first_check_ms=$(awk -v scale="$time_scale" 'BEGIN { printf "%d", 90 * scale }')

# Waits for the server's fixed ready line `$label listening on URL` in `log`; prints the URL.
listening_url() {
  local log=$1 label=$2 line
  for _ in $(seq 1 300); do
    if line=$(grep -m1 "^$label listening on " "$log" 2>/dev/null); then
      echo "${line#"$label listening on "}"
      return 0
    fi
    sleep 0.1
  done
  echo "incident-replay.sh: no '$label listening on' line in $log:" >&2
  cat "$log" >&2
  return 1
}

"$bin"/bank-simulator --listen 127.0.0.1:0 --dedupe true \
  --status-check-first-after-ms "$bank_first_check_ms" --status-checks-at-most 3 >"$work/bank.log" 2>&1 &
pids+=($!)
bank_url=$(listening_url "$work/bank.log" "bank simulator")

# Started in this shell (not in a command substitution), so `pids` holds them for cleanup.
start_backend() {
  local policy=$1 addr=$2 log=$3
  env DATABASE_URL="$db_url" BANK_URL="$bank_url" LISTEN_ADDR="$addr" \
    ADMIN_ADDR=127.0.0.1:0 AUTH_JWT_SECRET="$secret" APP_ENV=production DATABASE_REPLICATION=none REQUIRE_EDGE_PROOF=false POLICY_FILE="$policy" \
    BANK_TIMEOUT_MS="$bank_timeout_ms" RECONCILE_INTERVAL_MS=100 RUST_LOG=warn,backend=info \
    NO_COLOR=1 "$bin"/backend serve >"$log" 2>&1 &
  pids+=($!)
}
start_backend "$work/policy.yaml" "$backend_addr" "$work/backend.log"
backend_url=$(listening_url "$work/backend.log" backend)
start_backend "$work/policy-no-key.yaml" 127.0.0.1:0 "$work/backend-no-key.log"
no_key_url=$(listening_url "$work/backend-no-key.log" backend)

if [ -n "$api" ]; then
  echo "incident-replay.sh: clients (b), (c) and (d) go through $api (backend $backend_url behind it)"
else
  api=$backend_url
  echo "incident-replay.sh: no --api given: clients (b), (c) and (d) talk to the backend directly at $api (no edge in the path)"
fi
echo "incident-replay.sh: database $db, bank $bank_url, backend timeout for the bank ${bank_timeout_ms} ms"
echo "incident-replay.sh: status checks (--rail $rail): first after ${first_after} s, at most $at_most within $within min, $per_second a second; stuck_after $stuck min"
echo

"$bin"/incident-replay --api "$api" --no-key-api "$no_key_url" --bank "$bank_url" \
  --database-url "$db_url" --secret "$secret" --chart "$chart" "${pass[@]}"

echo
echo "The bank's status checks over the night (--rail $rail; GET /stats):"
curl -fsS "$bank_url/stats"
echo
