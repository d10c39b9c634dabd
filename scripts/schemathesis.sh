#!/usr/bin/env bash
# Property-based tests of the public API driven by its own OpenAPI document (GET /openapi.json,
# backend/src/http/openapi.rs) with schemathesis: requests built from the document's schemas,
# valid and invalid, against a real backend on PostgreSQL with the bank simulator behind it.
# Fails on a 5xx, a reply whose status, content type, headers or body the document does not
# describe, valid data refused or invalid data accepted (every check schemathesis has: --checks
# all), in four phases: the document's examples, boundary values of each schema, random values
# from a fixed seed, and sequences following the document's links (pay, then read or refund).
# tests/schemathesis/hooks.py gives each user action a fresh key and names the three refusals of
# valid data the schema cannot foresee (a bank decline, a refund over what remains, a float
# amount such as 1118.0); every other refusal of valid data fails the run.
#
#   scripts/schemathesis.sh install   # install schemathesis only (scripts/setup-tools.sh)
#   scripts/schemathesis.sh           # install if missing, start everything, test, stop it all
#   scripts/schemathesis.sh ARGS...   # the same, ARGS added to `schemathesis run` (--phases stateful)
#
# Starts PostgreSQL if it is down (scripts/start-postgres.sh) and a database of its own, the bank
# simulator and the backend in development mode (the development token secret, no edge proof:
# the requests go to the backend directly) on ports they pick, and removes them all at the end,
# also on failure. Makes one payment and refund first, for the payment read to find
# (tests/schemathesis/schemathesis.toml). The shipped policy (policy.yaml: keys are v4 UUIDs, as the hooks assume); the
# bank simulator declines one debit in ten, so the 402 replies are checked too. Settings
# (environment): SCHEMATHESIS_SEED (default 1), SCHEMATHESIS_MAX_EXAMPLES (per operation,
# default 300: about half a minute of tests). Schemathesis is installed from PyPI
# into a virtualenv, /opt/schemathesis-$version, pinned with its dependencies in
# tests/schemathesis/requirements.txt.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

version=4.32.5
home=/opt/schemathesis-$version
st=$home/bin/schemathesis
say() { echo "schemathesis.sh: $*" >&2; }

install_missing() {
  if [ "$("$st" --version 2>/dev/null)" != "schemathesis, version $version" ]; then
    say "installing schemathesis $version from PyPI into $home"
    if ! /usr/bin/python3 -m venv --help >/dev/null 2>&1; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
    fi
    rm -rf "$home"
    /usr/bin/python3 -m venv "$home"
    "$home/bin/pip" install -q --disable-pip-version-check -r tests/schemathesis/requirements.txt
  fi
}

install_missing
if [ "${1:-}" = install ]; then exit 0; fi

scratch=$(mktemp -d)
database=schemathesis_$(date +%s)_$$
pids=()
stop() {
  local status=$?
  trap - EXIT INT TERM
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  psql -q -h 127.0.0.1 -U postgres -d postgres -c "DROP DATABASE IF EXISTS $database" \
    >/dev/null 2>&1 || true
  if [ "$status" -ne 0 ]; then
    say "failed; the backend's log:"
    tail -n 40 "$scratch/backend.log" >&2 || true
  fi
  rm -rf "$scratch"
  exit "$status"
}
trap stop EXIT
trap 'exit 130' INT TERM

# Waits for the ready line `$2 listening on http://ADDRESS` in log $1 and prints ADDRESS.
address_from() {
  local line
  for _ in $(seq 1 300); do
    line=$(grep -m 1 "^$2 listening on http://" "$1" || true)
    if [ -n "$line" ]; then
      echo "${line##*http://}"
      return
    fi
    sleep 0.1
  done
  say "$2 did not start:"
  cat "$1" >&2
  return 1
}

scripts/start-postgres.sh
psql -q -h 127.0.0.1 -U postgres -d postgres -c "CREATE DATABASE $database"
cargo build -q --locked -p backend -p bank-simulator --bins

target/debug/bank-simulator --listen 127.0.0.1:0 --decline-rate 0.1 --seed 1 >"$scratch/bank.log" 2>&1 &
pids+=($!)
bank=$(address_from "$scratch/bank.log" "bank simulator")

export APP_ENV=development POLICY_FILE=policy.yaml RUST_LOG=${RUST_LOG:-warn}
export DATABASE_URL=postgres://postgres@127.0.0.1:5432/$database BANK_URL=http://$bank
export LISTEN_ADDR=127.0.0.1:0 ADMIN_ADDR=127.0.0.1:0
target/debug/backend serve >"$scratch/backend.log" 2>&1 &
pids+=($!)
api=http://$(address_from "$scratch/backend.log" "backend")
for _ in $(seq 1 100); do curl -sf "$api/readyz" >/dev/null && break; sleep 0.1; done
curl -sf "$api/readyz" >/dev/null || { say "the backend did not become ready"; exit 1; }
token=$(target/debug/backend dev-token --user 42 --hours 1)

# A payment with a refund, for the payment read (tests/schemathesis/schemathesis.toml).
# Sends the JSON body $2 to path $1 with a fresh key; prints the reply, fails unless 201.
post() {
  curl -sf -X POST "$api$1" -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    -H "Idempotency-Key: $(cat /proc/sys/kernel/random/uuid)" -d "$2"
}
payment=$(post /v1/bills/schemathesis-1/pay '{"amount_paise": 5000, "payer_vpa": "asha@okbank"}' \
  || post /v1/bills/schemathesis-2/pay '{"amount_paise": 5000, "payer_vpa": "asha@okbank"}')
payment_id=$(echo "$payment" | sed -E 's/.*"payment_id":"([^"]+)".*/\1/')
post "/v1/payments/$payment_id/refunds" '{"amount_paise": 1000}' >/dev/null \
  || say "the bank refused the first refund; the payment read shows none"
export SCHEMATHESIS_PAYMENT_ID=$payment_id

# One worker: the same seed then draws the same requests in the same order, and Debian's
# Python 3.11 fails in Hypothesis when two threads parse source at once ("AST constructor
# recursion depth mismatch": a race in CPython's parser on threads). Run from target/schemathesis/,
# where it keeps its cache (.schemathesis/, which `st replay ID` reads after a failure).
started=$SECONDS
config=$PWD/tests/schemathesis
mkdir -p target/schemathesis
cd target/schemathesis
SCHEMATHESIS_HOOKS=$config/hooks.py "$st" --config-file "$config/schemathesis.toml" \
  run "$api/openapi.json" --url "$api" \
  --header "Authorization: Bearer $token" \
  --checks all \
  --phases examples,coverage,fuzzing,stateful \
  --seed "${SCHEMATHESIS_SEED:-1}" --max-examples "${SCHEMATHESIS_MAX_EXAMPLES:-300}" \
  --generation-database none --no-color --workers 1 "$@"
say "passed in $((SECONDS - started)) s"
