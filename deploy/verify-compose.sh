#!/usr/bin/env bash
# Runs deploy/compose.yaml as its header says, `podman-compose -f deploy/compose.yaml up -d
# --build`, and fails, saying what, unless a payment and its replay come back through it with
# one debit at the bank simulator.
#
# No registry is reachable on these machines, so the `rust` image the Dockerfiles compile in
# cannot be pulled: the static musl binaries are built here first (deploy/build-static.sh, as
# deploy/verify-container.sh does) and compose builds the images from them with
# BINARY_FROM=prebuilt, the file's documented setting for such machines. PostgreSQL's official
# image cannot be pulled either: a stand-in is built under its name from Debian's own packages
# by mmdebstrap (deploy/local-images/; the root filesystem, made by
# deploy/local-images/postgres-rootfs.sh, is kept in target/compose/ so a second run downloads
# nothing). Then: the stack comes up under a project name of its own with fresh secrets and free
# ports on 127.0.0.1; the backend replies to /healthz and /readyz; a payment is 201, its retry
# with the same Idempotency-Key gives the same body with Idempotent-Replayed, and the
# simulator's ledger holds one debit; the backend's log lines are JSON. Everything the run made
# (containers, the volume, the network, the images) is removed on exit. Podman as the project's
# container notes measured on these machines (runc, no default ulimits). Called by
# tests/run-all.sh; usage: deploy/verify-compose.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
started=$SECONDS

fail() { echo "verify-compose: FAILED: $*" >&2; exit 1; }
ok() { echo "  ok: $*"; }

# --- Tools (scripts/setup-tools.sh installs them).
for tool in podman runc podman-compose mmdebstrap; do
  command -v "$tool" >/dev/null || fail "$tool is missing; run scripts/setup-tools.sh"
done

run=$$
project=safe-retries-check-$run
scratch=$(mktemp -d)
backend_image=localhost/safe-retries/payments-backend:compose-check-$run
bank_image=localhost/safe-retries/bank-simulator:compose-check-$run
postgres_image=docker.io/library/postgres:15-bookworm
rootfs_image=localhost/debian-postgres-rootfs:bookworm
printf '[containers]\ndefault_ulimits = []\n[engine]\nruntime = "runc"\n' >"$scratch/containers.conf"
export CONTAINERS_CONF=$scratch/containers.conf
compose() { timeout 300 podman-compose -f deploy/compose.yaml -p "$project" "$@"; }
cleanup() {
  compose down -v >/dev/null 2>&1 || true
  # podman-compose 1.0.3 leaves the project's network behind.
  podman network rm -f "${project}_default" >/dev/null 2>&1 || true
  podman rmi -f "$backend_image" "$bank_image" "$postgres_image" "$rootfs_image" >/dev/null 2>&1 || true
  rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- What this machine lacks: the static binaries (for BINARY_FROM=prebuilt) and PostgreSQL's
# image (a stand-in).
musl=$(deploy/build-static.sh)
rootfs=$(deploy/local-images/postgres-rootfs.sh) || fail "no root filesystem for PostgreSQL's image"
timeout 300 podman import -q "$rootfs" "$rootfs_image" >/dev/null
timeout 300 podman build -q --format docker -t "$postgres_image" \
  -f deploy/local-images/postgres.Containerfile deploy/local-images >/dev/null
ok "static binaries in $musl; $postgres_image built (stand-in)"

# --- Up, with fresh secrets and free ports.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
secret() { head -c 48 /dev/urandom | base64 -w 0 | tr '/+' '_-'; }
export BACKEND_IMAGE=$backend_image BANK_IMAGE=$bank_image BINARY_FROM=prebuilt \
  POSTGRES_PASSWORD=$(secret) AUTH_JWT_SECRET=$(secret) \
  EDGE_PROOF_SECRET=$(secret) REQUIRE_EDGE_PROOF=false \
  API_PORT=$(free_port) ADMIN_PORT=$(free_port) BANK_PORT=$(free_port)
compose up -d --build >"$scratch/up.log" 2>&1 || { cat "$scratch/up.log" >&2; fail "podman-compose up --build"; }
for image in "$backend_image" "$bank_image"; do
  podman image exists "$image" || fail "podman-compose up --build did not build $image"
done
ok "images built by podman-compose up --build: $backend_image, $bank_image"
# awaited URL SECONDS WHAT: waits up to SECONDS for URL to reply 2xx, else fails with the
# stack's logs, naming WHAT.
awaited() {
  for _ in $(seq 1 "$2"); do
    curl -sf "$1" >/dev/null && return
    sleep 1
  done
  curl -sf "$1" >/dev/null || { compose logs >&2 || true; fail "$3 did not reply within $2 s"; }
}
api=http://127.0.0.1:$API_PORT
awaited "$api/readyz" 120 "the backend's /readyz"
curl -sf "$api/healthz" >/dev/null || { compose logs >&2 || true; fail "the backend did not reply to /healthz"; }
ok "up: the backend replies to /healthz and /readyz on $api"
# The backend waits for the simulator's container to start, not for it to listen: a payment
# sent before it listens is refused as "nothing charged" (correctly, but not this check's point).
bank=http://127.0.0.1:$BANK_PORT
awaited "$bank/ledger" 60 "the bank simulator"
ok "up: the bank simulator replies on $bank"

# --- A payment and its replay.
token=$(env -i POLICY_FILE=policy.yaml REQUIRE_EDGE_PROOF=false AUTH_JWT_SECRET="$AUTH_JWT_SECRET" \
  "$musl/backend" dev-token --user 7)
key=$(cat /proc/sys/kernel/random/uuid)
pay() {
  curl -s -D "$scratch/headers-$1" -o "$scratch/body-$1" -w '%{http_code}' -X POST "$api/v1/bills/elec-7/pay" \
    -H "Authorization: Bearer $token" -H "Idempotency-Key: $key" -H 'Content-Type: application/json' \
    -d '{"amount_paise":230000,"payer_vpa":"asha@okbank"}'
}
[ "$(pay first)" = 201 ] || fail "the payment: $(cat "$scratch/body-first")"
[ "$(pay retry)" = 201 ] || fail "the retry: $(cat "$scratch/body-retry")"
cmp -s "$scratch/body-first" "$scratch/body-retry" || fail "the retry's body differs from the payment's"
grep -qi '^idempotent-replayed: true' "$scratch/headers-retry" || fail "the retry is not marked Idempotent-Replayed"
debits=$(curl -sf "$bank/ledger" | python3 -c 'import json, sys; print(len(json.load(sys.stdin)["debits"]))')
[ "$debits" = 1 ] || fail "the bank's ledger holds $debits debits, not 1"
ok "a payment and its replay: 201 twice, the same body, Idempotent-Replayed, one debit at the bank"
backend_container=$(podman ps -a --format '{{.Names}}' \
  --filter "label=com.docker.compose.project=$project" --filter label=com.docker.compose.service=backend | head -1)
podman logs "$backend_container" >"$scratch/backend.log" 2>&1 || fail "no log from the backend's container"
grep '"target":"access"' "$scratch/backend.log" | head -1 | python3 -c 'import json, sys; json.loads(sys.stdin.readline())' \
  || { tail -5 "$scratch/backend.log" >&2; fail "the backend's access line is not a JSON object"; }
ok "the backend logs JSON lines"
echo "verify-compose: passed in $((SECONDS - started)) s"
