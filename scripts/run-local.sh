#!/usr/bin/env bash
# Runs the whole system locally: PostgreSQL, the bank simulator, the backend, and the edge
# Worker under wrangler dev in front of it. Prints the URLs, a development token and a curl
# that pays one bill twice with one key (one debit, one replay). Ctrl-C stops everything.
#
# Ports: edge 8787, backend 8080, bank simulator 8081 (all on 127.0.0.1).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/setup-tools.sh
scripts/start-postgres.sh
psql -h 127.0.0.1 -U postgres -d postgres -Atc "SELECT 1 FROM pg_database WHERE datname = 'payments'" | grep -q 1 \
  || psql -q -h 127.0.0.1 -U postgres -d postgres -c "CREATE DATABASE payments"
cargo build -q -p backend -p bank-simulator --bins

export APP_ENV=development
export DATABASE_URL=postgres://postgres@127.0.0.1:5432/payments
export BANK_URL=http://127.0.0.1:8081 LISTEN_ADDR=127.0.0.1:8080 POLICY_FILE=policy.yaml
export RUST_LOG=${RUST_LOG:-info}

pids=()
stop() {
  trap - INT TERM EXIT
  echo; echo "stopping..."
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap stop INT TERM EXIT

target/debug/bank-simulator --listen 127.0.0.1:8081 --latency-ms 300 --jitter-ms 200 & pids+=($!)
target/debug/backend serve & pids+=($!)
for _ in $(seq 1 100); do curl -sf http://127.0.0.1:8080/readyz >/dev/null && break; sleep 0.2; done
curl -sf http://127.0.0.1:8080/readyz >/dev/null || { echo "the backend did not become ready" >&2; exit 1; }

api=http://127.0.0.1:8080
if [ -x scripts/run-edge-dev.sh ]; then
  scripts/run-edge-dev.sh & pids+=($!)
  edge_pid=$!
  # wrangler builds the Worker first: seconds when built, minutes on a fresh machine.
  echo "run-local: waiting for the edge on 127.0.0.1:8787 (its first build takes minutes)"
  for _ in $(seq 1 1500); do
    curl -sf http://127.0.0.1:8787/healthz >/dev/null && { api=http://127.0.0.1:8787; break; }
    kill -0 "$edge_pid" 2>/dev/null || { echo "run-local: the edge stopped; clients call the backend" >&2; break; }
    sleep 0.2
  done
fi

token=$(target/debug/backend dev-token --user 42)

# The pay-a-bill page (clients/typescript/web/), on the same origin as the API it proxies.
(cd clients/typescript && npm run -s build:web >/dev/null)
API_URL=$api LISTEN_ADDR=127.0.0.1:8788 node clients/typescript/web/serve.mjs & pids+=($!)
operator_token=$(target/debug/backend dev-operator-token --name dev-operator)
key=$(cat /proc/sys/kernel/random/uuid)
cat <<INFO

  API (clients call this): $api
  pay-a-bill page:         http://127.0.0.1:8788/#token=$token&user=42
  backend:                 http://127.0.0.1:8080   (policy: /idempotency-policy; metrics: http://127.0.0.1:9090/metrics)
  bank simulator:          http://127.0.0.1:8081   (ledger: /ledger)
  operator console:        http://127.0.0.1:9090/admin/console   (admin listener only)

  An operator token for the console (paste it into the page):
    $operator_token

  A development token for user 42:
    export TOKEN=$token

  Pay one bill twice with one key: the second reply is a replay, and the ledger shows one debit.
    for attempt in 1 2; do
      curl -s -i -X POST $api/v1/bills/elec-2026-11/pay \\
        -H "Authorization: Bearer \$TOKEN" -H "Idempotency-Key: $key" \\
        -H 'Content-Type: application/json' -d '{"amount_paise": 230000, "payer_vpa": "asha@okbank"}'
      echo
    done
    curl -s http://127.0.0.1:8081/ledger

  Ctrl-C stops everything.
INFO
wait
