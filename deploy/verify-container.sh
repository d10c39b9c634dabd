#!/usr/bin/env bash
# Runs the production image as a deployment would and fails, saying what, unless it behaves.
#
# Builds the Dockerfile's image with podman from a static musl backend built here (no registry
# for base images on these machines: --build-arg BINARY_FROM=prebuilt takes the binary from the
# build context and skips the `rust` build stage), then checks:
#   - the image holds exactly the backend binary and the policy (no simulator, no shell) and
#     declares user 65532 and its HEALTHCHECK;
#   - run 1, the secrets in the environment: on a fresh PostgreSQL database the container applies
#     the migrations, replies to /healthz and /readyz (and the admin listener /readyz and
#     /metrics, which the public listener refuses), its process runs as UID 65532, the image's
#     HEALTHCHECK passes, a payment and its replay with the same Idempotency-Key give the same
#     body with Idempotent-Replayed and one debit at the bank simulator's ledger (its dedupe
#     off), a token signed with another secret is refused, and SIGTERM (`podman stop`) ends it
#     with exit code 0 within the stop timeout;
#   - run 2, the secrets in read-only mounted files (AUTH_JWT_SECRET_FILE, DATABASE_URL_FILE):
#     the same, on the database run 1 left (the replay of run 1's key comes back, no migration
#     runs twice);
#   - a container given both AUTH_JWT_SECRET and AUTH_JWT_SECRET_FILE refuses to start.
# Podman runs as the project's container notes measured on these machines: runc, a
# containers.conf without default ulimits, host network; everything binds 127.0.0.1 only.
# Every wait is bounded; containers, the image, the database and the simulator are removed on
# exit (KEEP_IMAGE=1 keeps the image). Called by tests/run-all.sh; usage: deploy/verify-container.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
started=$SECONDS

fail() { echo "verify-container: FAILED: $*" >&2; exit 1; }
ok() { echo "  ok: $*"; }

# --- Tools (scripts/setup-tools.sh installs them), the binary the Dockerfile's `prebuilt` stage
# copies (the one file .dockerignore lets through from target/), and the bank simulator to run
# beside the image (a test tool, never in it), both from the one static build
# deploy/verify-compose.sh uses too.
for tool in podman runc; do
  command -v "$tool" >/dev/null || fail "$tool is missing; run scripts/setup-tools.sh"
done
static=$(deploy/build-static.sh)
binary=$static/backend
bank_simulator=$static/bank-simulator

# --- Names of this run (another run may share the machine), and the clean-up of all of them.
run=$$
scratch=$(mktemp -d)
image=localhost/payments-backend:verify-$run
binary_image=localhost/payments-backend:verify-binary-$run
db=container_check_$run
containers=()
bank_pid=
cleanup() {
  # One name per call: podman rm given a name it does not know removes none of the others.
  for container in "${containers[@]}"; do
    podman rm -f -t 0 "$container" >/dev/null 2>&1 || true
  done
  if [ "${KEEP_IMAGE:-0}" != 1 ]; then
    podman rmi -f "$image" "$binary_image" >/dev/null 2>&1 || true
  fi
  if [ -n "$bank_pid" ]; then kill "$bank_pid" 2>/dev/null || true; wait "$bank_pid" 2>/dev/null || true; fi
  psql -q -h 127.0.0.1 -U postgres -d postgres -c "DROP DATABASE IF EXISTS $db" >/dev/null 2>&1 || true
  rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 130' INT TERM  # so that an interrupted run cleans up too

# --- Podman as measured here: runc (crun cannot set rlimits in this sandbox), no default
# ulimits, and a bound on every call. Without systemd, podman logs an error about health-check
# timers on run and rm; the checks run the health check themselves (`podman healthcheck run`).
printf '[containers]\ndefault_ulimits = []\n' >"$scratch/containers.conf"
export CONTAINERS_CONF=$scratch/containers.conf
podman() { timeout 120 podman --runtime runc "$@"; }

# Waits up to $1 seconds for the command after it to succeed; fails with $2 otherwise.
wait_for() {
  local seconds=$1 what=$2 deadline
  shift 2
  deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || fail "$what (waited ${seconds}s)"
    sleep 0.2
  done
}
# A port free now on 127.0.0.1. Only the API's port is chosen this way: the image's
# HEALTHCHECK reads LISTEN_ADDR, so it must be a real port; everything else binds port 0 and
# reports the port it got on its ready line.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# The HTTP status of a GET (000 when nothing replies).
status_of() { curl -s -o /dev/null --max-time 5 -w '%{http_code}' "$1" || true; }
api_ready() { [ "$(status_of "$api/readyz")" = 200 ]; }
psql_db() { psql -h 127.0.0.1 -U postgres -d "$db" -Atqc "$1"; }

# --- The image: the Dockerfile as it is, the repository as its context. The `prebuilt` stage
# is tagged too, so that clean-up removes it with the image.
echo "verify-container: building $image"
podman build -q --format docker --build-arg BINARY_FROM=prebuilt --target prebuilt -t "$binary_image" -f Dockerfile . >/dev/null
podman build -q --format docker --build-arg BINARY_FROM=prebuilt -t "$image" -f Dockerfile . >/dev/null
size=$(podman image inspect "$image" --format '{{.Size}}')
echo "  image size: $size bytes ($(awk -v b="$size" 'BEGIN { printf "%.1f MB", b / 1e6 }'))"

# Every file in the image: a scratch image has no shell to list itself, so export a container
# created from it and never started.
files_container=payments-verify-files-$run
containers+=("$files_container")
podman create --name "$files_container" "$image" >/dev/null 2>"$scratch/create.err" \
  || fail "podman create: $(cat "$scratch/create.err")"
mkdir "$scratch/image"
podman export "$files_container" | tar -x -C "$scratch/image"
files=$(cd "$scratch/image" && find . -mindepth 1 ! -type d -printf '/%P\n' | sort)
sed 's/^/  file in the image: /' <<<"$files"
[ "$files" = "$(printf '%s\n' /etc/payments/policy.yaml /usr/local/bin/backend)" ] \
  || fail "the image must hold exactly /usr/local/bin/backend and /etc/payments/policy.yaml"
cmp -s "$scratch/image/usr/local/bin/backend" "$binary" || fail "the image's backend is not the binary built here"
cmp -s "$scratch/image/etc/payments/policy.yaml" policy.yaml || fail "the image's policy is not policy.yaml"
ok "only the backend binary and the policy (no simulator, no shell)"
user=$(podman image inspect "$image" --format '{{.Config.User}}')
[ "$user" = "65532:65532" ] || fail "the image runs as '$user', not 65532:65532"
healthcheck=$(podman image inspect "$image" --format '{{json .Config.Healthcheck.Test}}')
[ "$healthcheck" = '["CMD","/usr/local/bin/backend","healthcheck"]' ] || fail "unexpected HEALTHCHECK: $healthcheck"
ok "declares user $user and HEALTHCHECK $healthcheck"

# --- A fresh database and the bank (dedupe off: a second call would be a second debit).
# PostgreSQL is checked here, after the builds, rather than at the start: other suites on this
# machine (database_restart) stop it for a few seconds.
scripts/start-postgres.sh
psql -q -h 127.0.0.1 -U postgres -d postgres -c "CREATE DATABASE $db" || fail "cannot create the database $db"
[ "$(psql_db "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")" = 0 ] || fail "database $db is not empty"
database_url=postgres://postgres@127.0.0.1:5432/$db
"$bank_simulator" --listen 127.0.0.1:0 --dedupe false >"$scratch/bank.out" 2>"$scratch/bank.err" &
bank_pid=$!
wait_for 30 "the bank simulator did not report its address" grep -q '^bank simulator listening on http://' "$scratch/bank.out"
bank_url=$(sed -n 's/^bank simulator listening on //p' "$scratch/bank.out" | head -n 1)
debits() { curl -sf --max-time 5 "$bank_url/ledger" | jq '.debits | length'; }

secret=$(head -c 48 /dev/urandom | base64 -w 0)
# Tokens are signed outside the container, by the same binary with the secret given to the
# container: the container accepts them only if it really uses that secret.
sign() { env -i POLICY_FILE=policy.yaml REQUIRE_EDGE_PROOF=false AUTH_JWT_SECRET="$1" "$binary" dev-token --user 7; }
token=$(sign "$secret")
other_token=$(sign "$(head -c 48 /dev/urandom | base64 -w 0)")

# Starts container $1 (further podman arguments after it) in production mode on a fresh API
# port, waits for its ready lines and sets $api and $admin.
start_backend() {
  local name=$1 port
  shift
  port=$(free_port)
  containers+=("$name")
  podman run -d --name "$name" --network host \
    -e LISTEN_ADDR="127.0.0.1:$port" -e ADMIN_ADDR=127.0.0.1:0 -e BANK_URL="$bank_url" \
    -e DATABASE_REPLICATION=none -e REQUIRE_EDGE_PROOF=false "$@" "$image" >/dev/null 2>"$scratch/$name.run.err" \
    || fail "podman run $name: $(grep -v 'systemd' "$scratch/$name.run.err" || true)"
  local deadline=$((SECONDS + 60))
  until podman logs "$name" 2>/dev/null | grep -q '^backend listening on http://'; do
    if [ "$(podman inspect "$name" --format '{{.State.Running}}')" != true ]; then
      podman logs "$name" >&2 || true
      fail "$name exited before it was ready"
    fi
    [ "$SECONDS" -lt "$deadline" ] || fail "$name did not report its address in 60s"
    sleep 0.2
  done
  api=$(podman logs "$name" 2>/dev/null | sed -n 's/^backend listening on //p' | head -n 1)
  admin=$(podman logs "$name" 2>/dev/null | sed -n 's/^backend admin listening on //p' | head -n 1)
  [ "$api" = "http://127.0.0.1:$port" ] || fail "$name listens on '$api', not 127.0.0.1:$port"
  case $admin in http://127.0.0.1:*) ;; *) fail "$name's admin listener is on '$admin', not 127.0.0.1" ;; esac
  wait_for 30 "$name: GET /readyz did not reply 200" api_ready
  ok "$name up: API $api, admin $admin"
}

# POST a payment: $1 token, $2 key, $3 name for the saved headers and body; prints the status.
pay() {
  curl -s --max-time 15 -o "$scratch/$3.body" -D "$scratch/$3.headers" -w '%{http_code}' \
    -X POST "$api/v1/bills/elec-1/pay" -H "Authorization: Bearer $1" -H "Idempotency-Key: $2" \
    -H 'Content-Type: application/json' -d '{"amount_paise": 230000, "payer_vpa": "asha@okbank"}'
}
replayed() { grep -qi '^idempotent-replayed: true' "$scratch/$1.headers"; }

# The checks every run makes on the running container $1.
check_running() {
  local name=$1 pid uid
  [ "$(status_of "$api/healthz")" = 200 ] || fail "$name: GET /healthz is not 200"
  [ "$(status_of "$admin/readyz")" = 200 ] || fail "$name: the admin listener's /readyz is not 200"
  curl -sf --max-time 5 "$admin/metrics" | grep -q '^# EOF' || fail "$name: the admin listener's /metrics is not OpenMetrics"
  [ "$(status_of "$api/metrics")" = 404 ] || fail "$name: the public listener replies to /metrics"
  ok "/healthz, /readyz 200; admin /readyz 200 and /metrics; public /metrics 404"

  pid=$(podman inspect "$name" --format '{{.State.Pid}}')
  uid=$(awk '/^Uid:/ { print $2 ":" $3 ":" $4 ":" $5 }' "/proc/$pid/status")
  [ "$uid" = 65532:65532:65532:65532 ] || fail "$name's process runs as uid $uid, not 65532"
  ok "the process runs as UID 65532 (real, effective, saved, fs)"
  if podman exec "$name" /bin/sh -c true >/dev/null 2>&1; then fail "$name has a shell"; fi

  podman healthcheck run "$name" >"$scratch/health.out" 2>&1 || fail "$name: podman healthcheck run: $(cat "$scratch/health.out")"
  [ "$(podman inspect "$name" --format '{{.State.Health.Status}}')" = healthy ] || fail "$name is not healthy"
  # The health command must also fail when nothing replies, or it proves nothing.
  if podman exec -e LISTEN_ADDR=127.0.0.1:1 "$name" /usr/local/bin/backend healthcheck >/dev/null 2>&1; then
    fail "$name: the health command passes with nothing listening"
  fi
  ok "HEALTHCHECK passes (podman healthcheck run: healthy), and fails with nothing listening"

  [ "$(pay "$other_token" "$(cat /proc/sys/kernel/random/uuid)" "$name-foreign")" = 401 ] \
    || fail "$name accepted a token signed with another secret"
  ok "a token signed with another secret: 401"
}

# SIGTERM through `podman stop` (the image's stop signal); past 15 s podman would SIGKILL
# (exit code 137), so exit code 0 means the process drained and exited by itself in time.
stop_backend() {
  local name=$1 began code
  began=$(date +%s.%N)
  podman stop -t 15 "$name" >/dev/null 2>&1 || fail "podman stop $name"
  code=$(podman inspect "$name" --format '{{.State.ExitCode}}')
  [ "$code" = 0 ] || { podman logs --tail 20 "$name" >&2 || true; fail "$name exited with $code on SIGTERM"; }
  ok "SIGTERM: exit code 0 after $(awk -v b="$began" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - b }') s"
}

migrations=$(find migrations -maxdepth 1 -name '*.sql' | wc -l)
check_migrations() {
  local applied tables
  applied=$(psql_db "SELECT count(*) FROM _sqlx_migrations WHERE success")
  [ "$applied" = "$migrations" ] || fail "$applied migrations applied, migrations/ has $migrations"
  for table in idempotency_keys payments refunds; do
    [ "$(psql_db "SELECT to_regclass('public.$table') IS NOT NULL")" = t ] || fail "no table $table"
  done
  tables=$(psql_db "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
  ok "migrations: $applied of $migrations applied, $tables tables (idempotency_keys, payments, refunds among them)"
}

# --- Run 1: the secrets in the environment (passed by name, so they are not on podman's
# command line either).
echo "verify-container: run 1, secrets from the environment"
export AUTH_JWT_SECRET=$secret DATABASE_URL=$database_url
start_backend "payments-verify-env-$run" -e AUTH_JWT_SECRET -e DATABASE_URL
unset AUTH_JWT_SECRET DATABASE_URL
check_migrations
check_running "payments-verify-env-$run"
first_key=$(cat /proc/sys/kernel/random/uuid)
[ "$(pay "$token" "$first_key" first)" = 201 ] || fail "the payment replied $(head -c 300 "$scratch/first.body")"
! replayed first || fail "the first attempt was marked replayed"
[ "$(pay "$token" "$first_key" replay)" = 201 ] || fail "the replay replied $(head -c 300 "$scratch/replay.body")"
replayed replay || fail "the replay has no Idempotent-Replayed: true"
cmp -s "$scratch/first.body" "$scratch/replay.body" || fail "the replay's body differs from the first reply's"
[ "$(debits)" = 1 ] || fail "the ledger has $(debits) debits after two attempts with one key"
reference=$(jq -r .bank_reference "$scratch/first.body")
[ "$(curl -sf --max-time 5 "$bank_url/ledger" | jq -r '.debits[0].reference')" = "$reference" ] \
  || fail "the ledger's debit is not the payment's reference $reference"
ok "payment 201, replay 201 with Idempotent-Replayed: true and the same body; one debit ($reference)"
stop_backend "payments-verify-env-$run"

# --- Run 2: the same secrets from read-only mounted files, as a secret store mounts them (one
# trailing line break, readable by the container's user only).
echo "verify-container: run 2, secrets from mounted files"
mkdir "$scratch/secrets"
printf '%s\n' "$secret" >"$scratch/secrets/jwt"
printf '%s\n' "$database_url" >"$scratch/secrets/database_url"
chown 65532:65532 "$scratch/secrets/jwt" "$scratch/secrets/database_url"
chmod 0400 "$scratch/secrets/jwt" "$scratch/secrets/database_url"
file_run=payments-verify-file-$run
start_backend "$file_run" \
  -v "$scratch/secrets/jwt:/run/secrets/jwt:ro" -e AUTH_JWT_SECRET_FILE=/run/secrets/jwt \
  -v "$scratch/secrets/database_url:/run/secrets/database_url:ro" -e DATABASE_URL_FILE=/run/secrets/database_url
writable=$(podman inspect "$file_run" --format '{{range .Mounts}}{{if .RW}}{{.Destination}} {{end}}{{end}}')
[ -z "$writable" ] || fail "$file_run has writable mounts: $writable"
if podman inspect "$file_run" --format '{{range .Config.Env}}{{println .}}{{end}}' | grep -qE '^(AUTH_JWT_SECRET|DATABASE_URL)='; then
  fail "$file_run has a secret in its environment"
fi
ok "AUTH_JWT_SECRET_FILE and DATABASE_URL_FILE mounted read-only; no secret in the environment"
check_migrations
check_running "$file_run"
[ "$(pay "$token" "$first_key" replay2)" = 201 ] && replayed replay2 && cmp -s "$scratch/first.body" "$scratch/replay2.body" \
  || fail "run 1's key did not replay the same reply in run 2"
[ "$(pay "$token" "$(cat /proc/sys/kernel/random/uuid)" second)" = 201 ] || fail "a new payment replied $(head -c 300 "$scratch/second.body")"
[ "$(debits)" = 2 ] || fail "the ledger has $(debits) debits after two keys"
ok "run 1's key replayed the same body; a new key paid; two debits for two keys"
stop_backend "$file_run"

# --- Both sources of one secret: refused at start, naming both.
both=payments-verify-both-$run
containers+=("$both")
AUTH_JWT_SECRET=$secret podman run --name "$both" --network host -e AUTH_JWT_SECRET \
  -v "$scratch/secrets/jwt:/run/secrets/jwt:ro" -e AUTH_JWT_SECRET_FILE=/run/secrets/jwt \
  "$image" >"$scratch/both.out" 2>&1 && fail "a container given AUTH_JWT_SECRET and AUTH_JWT_SECRET_FILE started"
grep -q 'set AUTH_JWT_SECRET or AUTH_JWT_SECRET_FILE, not both' "$scratch/both.out" \
  || fail "both secrets set: the refusal does not name them: $(grep -v systemd "$scratch/both.out")"
ok "AUTH_JWT_SECRET and AUTH_JWT_SECRET_FILE together: refused at start"

echo "verify-container: container verified in $((SECONDS - started)) s"
