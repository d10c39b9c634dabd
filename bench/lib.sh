# Shared by the load scripts (sourced, not run): a stack of a bank simulator and a backend on a
# fresh database (PostgreSQL, or a SQLite file when STORE=sqlite), wrk runs, and the money check
# that ends every run. Everything binds 127.0.0.1. The caller sets `bin` (the directory of the
# server binaries).

pids=()
databases=()
scratch=$(mktemp -d)
stacks=0
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for db in "${databases[@]}"; do # NAME, or PORT/NAME on another server than 5432's
    case $db in */*) port=${db%%/*} db=${db#*/} ;; *) port=5432 ;; esac
    psql -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" || true
  done
  rm -rf "$scratch"
}
trap cleanup EXIT

# sql_value SQL: the one value SQL returns from the current stack's database, either store.
sql_value() {
  if [ "${STORE:-postgres}" = sqlite ]; then
    python3 -c 'import sqlite3, sys; print(sqlite3.connect(sys.argv[1]).execute(sys.argv[2]).fetchone()[0])' \
      "$db" "$1"
  else
    psql -h 127.0.0.1 -p "${db_port:-5432}" -U postgres -d "$db" -Atc "$1"
  fi
}

# migrated_database NAME [BEFORE]: a fresh PostgreSQL database on 5432 with the project's
# migrations (only those whose file name sorts before BEFORE, if given), dropped on exit.
migrated_database() {
  databases+=("$1")
  psql -q -h 127.0.0.1 -U postgres -d postgres -c "CREATE DATABASE $1"
  local migration
  for migration in migrations/*.sql; do
    if [ -n "${2:-}" ] && [[ ! "$(basename "$migration")" < "$2" ]]; then break; fi
    psql -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres -d "$1" -f "$migration"
  done
}

# pgbench_report DATABASE SCRIPT SECONDS: pgbench's report of bench/pgbench/SCRIPT.sql on
# DATABASE (8 clients, 2 threads, prepared).
pgbench_report() {
  pgbench -h 127.0.0.1 -U postgres -n -M prepared -c 8 -j 2 -T "$3" \
    -f "bench/pgbench/$2.sql" "$1" 2>/dev/null
}

# pgbench_tps DATABASE SCRIPT SECONDS: its transactions per second.
pgbench_tps() { pgbench_report "$@" | awk '/^tps/ { print $3 }'; }

need_wrk() {
  command -v wrk >/dev/null || { apt-get install -y -qq wrk >/dev/null \
    || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }; }
}

# start_stack NAME BACKEND_BINARY [BANK FLAGS...]: a bank simulator on 127.0.0.1:18081 and
# BACKEND_BINARY on 127.0.0.1:18080 (admin 18082) on a fresh database named after NAME
# (a PostgreSQL database, or with STORE=sqlite a SQLite file); extra backend settings come from
# the environment (BACKEND_LOG is its RUST_LOG, `error` by default); DB_PARAMS, if set, is
# appended to a PostgreSQL URL (`sslmode=disable`, say); DB_PORT, if set, is the PostgreSQL
# server's port on 127.0.0.1 (a replicated cluster's HAProxy), 5432 otherwise. Sets api, admin,
# bank, db (database name or file), db_port, backend_pid, bank_pid and token.
start_stack() {
  local name=$1 backend=$2 bank_port=18081 api_port=18080 database_url
  shift 2
  stacks=$((stacks + 1))
  if [ "${STORE:-postgres}" = sqlite ]; then
    db=$scratch/${name}_$stacks.sqlite
    database_url=sqlite://$db
  else
    db=${name}_$$_$stacks
    db_port=${DB_PORT:-5432}
    databases+=("$db_port/$db")
    psql -q -h 127.0.0.1 -p "$db_port" -U postgres -d postgres -c "CREATE DATABASE $db"
    database_url="postgres://postgres@127.0.0.1:$db_port/$db${DB_PARAMS:+?$DB_PARAMS}"
  fi
  bank=http://127.0.0.1:$bank_port
  api=http://127.0.0.1:$api_port
  admin=http://127.0.0.1:18082
  "$bin/bank-simulator" --listen "127.0.0.1:$bank_port" "$@" >/dev/null 2>&1 & pids+=($!)
  bank_pid=$!
  APP_ENV=development DATABASE_URL="$database_url" \
    BANK_URL=$bank \
    LISTEN_ADDR=127.0.0.1:$api_port ADMIN_ADDR=127.0.0.1:18082 \
    POLICY_FILE=policy.yaml RUST_LOG="${BACKEND_LOG:-error}" "$backend" serve >/dev/null 2>&1 & pids+=($!)
  backend_pid=$!
  for _ in $(seq 1 100); do curl -sf "$api/healthz" >/dev/null && break; sleep 0.1; done
  curl -sf "$api/healthz" >/dev/null || { echo "$backend did not start" >&2; return 1; }
  token=$(APP_ENV=development POLICY_FILE=policy.yaml "$bin/backend" dev-token --user 42)
}

# finished_key: prints a fresh key after paying bill elec-replay with it on the current stack,
# for the replay runs (bench/replay.lua's REPLAY_KEY).
finished_key() {
  local key
  key=$(cat /proc/sys/kernel/random/uuid)
  curl -sf -o /dev/null -X POST "$api/v1/bills/elec-replay/pay" -H "Authorization: Bearer $token" \
    -H "Idempotency-Key: $key" -H 'Content-Type: application/json' \
    -d '{"amount_paise":230000,"payer_vpa":"asha@okbank"}' || return 1
  echo "$key"
}

# stop_stack: stops the last stack's processes.
stop_stack() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  # Only the stack's own: a script's long-lived helper (a trace receiver) is a child too.
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  pids=()
}

# wrk_run CONNECTIONS SECONDS [wrk arguments...]: wrk's full report, with the bearer token.
wrk_run() {
  local connections=$1 seconds=$2
  shift 2
  wrk -t2 -c"$connections" -d"${seconds}s" --timeout 30s -H "Authorization: Bearer $token" "$@"
}

# median NUMBER...: the middle one (the upper middle of an even count).
median() { printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# requests_per_second: wrk's requests/s from its report on standard input.
requests_per_second() { awk '/Requests\/sec/ { print $2 }'; }

# CPU time, in clock ticks (`getconf CLK_TCK` per second), read from /proc/PID/stat: after the
# command name, field 12 is utime, 13 stime, 14 and 15 the same of the reaped children.
# cpu_ticks PID...: of these processes so far.
cpu_ticks() {
  local pid
  for pid; do sed 's/^.*) //' "/proc/$pid/stat"; done 2>/dev/null | awk '{ t += $12 + $13 } END { print t + 0 }'
}
# postgres_cpu_ticks: of the PostgreSQL server on 5432 so far: its postmaster, every live
# process under it, and the ones that have ended (the postmaster's reaped children).
postgres_cpu_ticks() {
  local postmaster
  postmaster=$(head -n 1 "$(psql -h 127.0.0.1 -U postgres -d postgres -Atc 'SHOW data_directory')/postmaster.pid")
  echo "$(cpu_ticks "$postmaster" $(pgrep -P "$postmaster")) $(sed 's/^.*) //' "/proc/$postmaster/stat")" \
    | awk '{ print $1 + $15 + $16 }'
}

# counted_wrk_run NAME CONNECTIONS SECONDS [wrk arguments...]: a wrk run against the current
# stack that appends to $results `NAME REQUESTS/S` and `NAME_cpu` with the CPU microseconds per
# request of the backend, PostgreSQL (the whole server; zero on SQLite), the bank simulator and
# wrk itself, each read from /proc before and after.
counted_wrk_run() {
  local name=$1 report backend_before bank_before postgres_before requests
  shift
  report=$scratch/wrk-$name
  backend_before=$(cpu_ticks "$backend_pid") bank_before=$(cpu_ticks "$bank_pid")
  postgres_before=$(postgres_cpu_ticks)
  # wrk's own CPU: the subshell's reaped children's, read once wrk has ended, by the subshell
  # itself (in a pipeline or a $(...), $BASHPID would be another process).
  (
    wrk_run "$@" >"$report"
    read -r stat <"/proc/$BASHPID/stat"
    read -ra fields <<<"${stat##*) }"
    echo $((fields[13] + fields[14])) >"$report.ticks"
  )
  requests=$(awk '/requests in/ { print $1 }' "$report")
  local backend=$(($(cpu_ticks "$backend_pid") - backend_before)) bank=$(($(cpu_ticks "$bank_pid") - bank_before))
  local postgres=$(($(postgres_cpu_ticks) - postgres_before))
  [ "${STORE:-postgres}" = sqlite ] && postgres=0
  echo "$name $(requests_per_second <"$report")" >>"$results"
  awk -v name="$name" -v n="$requests" -v hz="$(getconf CLK_TCK)" -v b="$backend" -v p="$postgres" \
    -v k="$bank" -v w="$(cat "$report.ticks")" \
    'BEGIN { us = 1e6 / hz / n; printf "%s_cpu %.1f %.1f %.1f %.1f\n", name, b * us, p * us, k * us, w * us }' >>"$results"
}

# check_money: waits (bounded) until no key of the current stack is unfinished, then fails
# unless the bank's debits equal the succeeded payments. Prints the check.
check_money() {
  local unfinished debits payments
  for _ in $(seq 1 100); do
    unfinished=$(sql_value "SELECT count(*) FROM idempotency_keys WHERE state NOT IN ('done', 'released')")
    [ "$unfinished" = 0 ] && break
    sleep 0.2
  done
  debits=$(curl -sf "$bank/ledger" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["debits"]))')
  payments=$(sql_value "SELECT count(*) FROM payments WHERE status = 'succeeded'")
  echo "check: bank debits $debits, succeeded payments $payments (must be equal), unfinished keys $unfinished"
  [ "$debits" = "$payments" ]
}

# unknown_backlog DATABASE KEYS: KEYS payments whose replies were all lost, on a migrated
# PostgreSQL database: each key `unknown` (claimed a minute ago), its payment `pending`, and its
# debit held by the bank simulator on 127.0.0.1:18081 under the payment's reference.
unknown_backlog() {
  psql -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -U postgres -d "$1" -v keys="$2" <<'SQL'
WITH lost AS (
    SELECT g, 1000 + g % 100 AS user_id, gen_random_uuid() AS key,
           gen_random_uuid() AS payment_id,
           now() - interval '1 minute' + g * interval '1 millisecond' AS at
    FROM generate_series(1, :keys) AS g),
paid AS (
    INSERT INTO payments (payment_id, user_id, bill_id, amount_paise, payer_vpa, status,
                          bank_reference, created_at)
    SELECT payment_id, user_id, 'elec-' || g, 230000, 'asha@okbank', 'pending',
           'pay-' || payment_id, at
    FROM lost)
INSERT INTO idempotency_keys (user_id, key, operation, state, fingerprint, resource_id,
                              created_at, claimed_at, bank_call_ended)
SELECT user_id, key, 'pay_bill', 'unknown', sha256(key::text::bytea), payment_id, at, at, false
FROM lost;
SQL
  psql -h 127.0.0.1 -U postgres -d "$1" -Atc "SELECT bank_reference FROM payments" | python3 -c '
import http.client, json, sys
bank = http.client.HTTPConnection("127.0.0.1", 18081)
for reference in sys.stdin.read().split():
    bank.request("POST", "/debits", json.dumps(
        {"reference": reference, "amount_paise": 230000, "account": "asha@okbank"}),
        {"Content-Type": "application/json"})
    reply = bank.getresponse()
    reply.read()
    if reply.status != 201 and reply.status != 200:
        sys.exit(f"the bank refused a debit: {reply.status}")
'
}
