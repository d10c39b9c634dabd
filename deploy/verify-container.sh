#!/usr/bin/env bash
# Builds the Dockerfile's image from a static musl backend binary built here (no registry for
# base images on this machine: --build-arg BINARY_FROM=prebuilt takes the binary from the build
# context instead of the `rust` build stage, which is then skipped), lists the image's files and
# fails if it holds anything but the backend binary and the policy, then runs the image with
# podman against the local PostgreSQL and a bank simulator: checks it runs as a non-root user,
# answers /readyz, passes its HEALTHCHECK command, takes a payment, and stops cleanly on
# SIGTERM. Usage: deploy/verify-container.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v podman >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman >/dev/null; }
rustup target list --installed | grep -qx x86_64-unknown-linux-musl || rustup target add x86_64-unknown-linux-musl
# The embedded SQLite store compiles SQLite's C source: it needs a C compiler for musl.
command -v musl-gcc >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq musl-tools >/dev/null; }
export CC_x86_64_unknown_linux_musl=musl-gcc
scripts/start-postgres.sh

# The binary the Dockerfile's `prebuilt` stage copies (the one file .dockerignore lets through
# from target/), and a bank simulator to run beside the image (a test tool, not in the image).
cargo build -q --locked --profile server --target x86_64-unknown-linux-musl -p backend --bin backend
file target/x86_64-unknown-linux-musl/server/backend | grep -qE 'static(-pie)? linked' \
  || { echo "backend is not statically linked" >&2; exit 1; }
cargo build -q --locked -p bank-simulator --bin bank-simulator
bank_simulator=target/debug/bank-simulator

scratch=$(mktemp -d)
db=container_check_$$
cleanup() {
  # One name per call: podman rm given a name it does not know removes none of the others.
  for container in payments-verify payments-verify-files; do podman rm -f "$container" >/dev/null 2>&1 || true; done
  [ -n "${bank_pid:-}" ] && kill "$bank_pid" 2>/dev/null || true
  [ -n "${backend_pid:-}" ] && kill "$backend_pid" 2>/dev/null || true
  psql -q -h 127.0.0.1 -U postgres -d postgres -c "DROP DATABASE IF EXISTS $db" 2>/dev/null || true
  rm -rf "$scratch"
}
trap cleanup EXIT
# The Dockerfile as it is, with the repository as its context, as `docker build .` would use.
podman build -q --format docker --build-arg BINARY_FROM=prebuilt -t payments-backend:verify -f Dockerfile . >/dev/null
echo "image size: $(podman image inspect payments-backend:verify --format '{{.Size}}') bytes"

# Every file in the image (a scratch image has no shell to list itself: export a created,
# never started, container). Only the backend and the policy may be there.
podman create --no-healthcheck --name payments-verify-files payments-backend:verify >/dev/null
mkdir -p "$scratch/image"
podman export payments-verify-files | tar -x -C "$scratch/image"
podman rm payments-verify-files >/dev/null
files=$(cd "$scratch/image" && find . -mindepth 1 ! -type d -printf '/%P\n' | sort)
echo "files in the image:"
sed 's/^/  /' <<<"$files"
expected=$(printf '%s\n' /etc/payments/policy.yaml /usr/local/bin/backend)
[ "$files" = "$expected" ] || { echo "the image must hold exactly the backend binary and the policy" >&2; exit 1; }
cmp -s "$scratch/image/usr/local/bin/backend" target/x86_64-unknown-linux-musl/server/backend \
  || { echo "the image's backend is not the binary built here" >&2; exit 1; }

healthcheck=$(podman inspect --type image payments-backend:verify --format '{{.Config.Healthcheck}}')
echo "health check: $healthcheck"
user=$(podman image inspect payments-backend:verify --format '{{.Config.User}}')
[ "$user" = "65532:65532" ] && [ -n "$healthcheck" ] && [ "$healthcheck" != "<no value>" ] || { echo "image runs as '$user', not a non-root user" >&2; exit 1; }

psql -q -h 127.0.0.1 -U postgres -d postgres -c "CREATE DATABASE $db"
"$bank_simulator" --listen 127.0.0.1:18181 >/dev/null 2>&1 & bank_pid=$!
env=(DATABASE_URL="postgres://postgres@127.0.0.1:5432/$db" BANK_URL=http://127.0.0.1:18181
     LISTEN_ADDR=127.0.0.1:18180 APP_ENV=development POLICY_FILE=/etc/payments/policy.yaml)
if podman run -d --name payments-verify --network host --no-healthcheck \
     $(printf -- '-e %s ' "${env[@]}") -v "$PWD/policy.yaml:/etc/payments/policy.yaml:ro" \
     payments-backend:verify >/dev/null 2>"$scratch/run.err"; then
  in_image() { podman exec payments-verify /usr/local/bin/backend "$@"; }
  stop_backend() { podman stop -t 10 payments-verify >/dev/null; code=$(podman inspect payments-verify --format '{{.State.ExitCode}}'); }
else
  # Some sandboxes refuse the container runtime's setrlimit calls; then the image's own binary
  # runs directly, with the image's environment, which is what the container would run.
  echo "podman run is not permitted here ($(tail -n 1 "$scratch/run.err")); running the image's binary directly"
  export "${env[@]}" POLICY_FILE="$PWD/policy.yaml"
  "$scratch/image/usr/local/bin/backend" serve >/dev/null 2>&1 & backend_pid=$!
  in_image() { "$scratch/image/usr/local/bin/backend" "$@"; }
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
