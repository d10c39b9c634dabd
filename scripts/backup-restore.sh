#!/usr/bin/env bash
# A restore to a point in time, tried (docs/procedures/restore-to-a-point-in-time.md): a
# PostgreSQL cluster of its own (initdb in a temporary directory, 127.0.0.1 on a free port)
# archives its WAL (`archive_command`); a base backup is taken with `pg_basebackup`; the backend
# takes five payments (batch A), a restore point is made, then five more (batch B). The cluster
# is then lost and restored from the base backup and the archive to the restore point. What the
# check proves:
# - the restore keeps A (every key, payment and its replay byte for byte) and loses B;
# - the bank's settlement file, imported with `backend settle` before reopening, names exactly
#   B's five debits as unknown references: the operator's list of money the restored database
#   does not know (the procedure's step);
# - the hazard the procedure guards against: reopened without that step, a phone's retry of a
#   lost B key claims it again under a new reference and the bank debits a second time.
# Everything it started is stopped and its directory removed on exit. Called by
# tests/run-all.sh; needs the workspace's binaries built (cargo build --workspace --bins).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
started=$SECONDS

fail() { echo "backup-restore: FAILED: $*" >&2; exit 1; }
say() { echo "backup-restore: $*"; }

version=$(ls /usr/lib/postgresql | sort -V | tail -n 1)
pg=/usr/lib/postgresql/$version/bin
backend=$PWD/target/debug/backend
bank_simulator=$PWD/target/debug/bank-simulator
for binary in "$backend" "$bank_simulator" "$pg/initdb" "$pg/pg_basebackup"; do
  [ -x "$binary" ] || fail "$binary is missing (cargo build --workspace --bins; PostgreSQL)"
done

work=$(mktemp -d /tmp/backup-restore.XXXXXX)
chown postgres "$work"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for data in primary restored; do
    [ -f "$work/$data/postmaster.pid" ] && runuser -u postgres -- "$pg/pg_ctl" -D "$work/$data" -m immediate stop >/dev/null 2>&1
  done
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
as_postgres() { runuser -u postgres -- "$@"; }
port=$(free_port)
sql() { "$pg/psql" -h 127.0.0.1 -p "$port" -U postgres -d payments -qAtX -c "$1"; }

# --- A cluster that archives its WAL.
as_postgres "$pg/initdb" -D "$work/primary" -A trust -U postgres >/dev/null
as_postgres mkdir "$work/archive"
cat >>"$work/primary/postgresql.conf" <<EOF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$work'
wal_level = replica
archive_mode = on
archive_command = 'test ! -f $work/archive/%f && cp %p $work/archive/%f'
EOF
as_postgres "$pg/pg_ctl" -D "$work/primary" -l "$work/primary.log" -w start >/dev/null
"$pg/createdb" -h 127.0.0.1 -p "$port" -U postgres payments

# --- The bank and the backend (development mode: its published secret, no edge proof).
bank_port=$(free_port)
"$bank_simulator" --listen "127.0.0.1:$bank_port" >"$work/bank.log" 2>&1 &
pids+=($!)
export DATABASE_URL="postgres://postgres@127.0.0.1:$port/payments" APP_ENV=development \
  BANK_URL="http://127.0.0.1:$bank_port" POLICY_FILE=$PWD/policy.yaml RUST_LOG=warn
"$backend" migrate >/dev/null
api_port=$(free_port)
serve() {
  LISTEN_ADDR="127.0.0.1:$api_port" ADMIN_ADDR="127.0.0.1:$(free_port)" "$backend" serve \
    >>"$work/backend.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$api_port/readyz" >/dev/null && return
    sleep 0.1
  done
  fail "the backend did not become ready: $(tail -5 "$work/backend.log")"
}
serve
token=$("$backend" dev-token --user restore-check)
pay() { # pay KEY BILL → the reply's status, its body in $work/reply-KEY
  curl -s -o "$work/reply-$1" -w '%{http_code}' -X POST "http://127.0.0.1:$api_port/v1/bills/$2/pay" \
    -H "Authorization: Bearer $token" -H "Idempotency-Key: $1" -H 'content-type: application/json' \
    -d '{"amount_paise":1500,"payer_vpa":"asha@okbank"}'
}
debits() { curl -sf "http://127.0.0.1:$bank_port/ledger" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["debits"]))'; }

# --- The backup, batch A, the restore point, batch B.
as_postgres "$pg/pg_basebackup" -h 127.0.0.1 -p "$port" -U postgres -D "$work/base" -X stream -c fast
keys_a=() keys_b=()
for i in 1 2 3 4 5; do
  key=$(cat /proc/sys/kernel/random/uuid); keys_a+=("$key")
  [ "$(pay "$key" "a-$i")" = 201 ] || fail "batch A payment $i: $(cat "$work/reply-$key")"
  cp "$work/reply-$key" "$work/first-$key"
done
sql "SELECT pg_create_restore_point('before-batch-b')" >/dev/null
for i in 1 2 3 4 5; do
  key=$(cat /proc/sys/kernel/random/uuid); keys_b+=("$key")
  [ "$(pay "$key" "b-$i")" = 201 ] || fail "batch B payment $i: $(cat "$work/reply-$key")"
done
[ "$(debits)" = 10 ] || fail "the bank holds $(debits) debits, not 10"
# The segment holding the restore point is archived; then the cluster is lost.
segment=$(sql "SELECT pg_walfile_name(pg_current_wal_lsn())")
sql "SELECT pg_switch_wal()" >/dev/null
for _ in $(seq 100); do [ -f "$work/archive/$segment" ] && break; sleep 0.1; done
[ -f "$work/archive/$segment" ] || fail "WAL segment $segment was not archived"
kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true
as_postgres "$pg/pg_ctl" -D "$work/primary" -m immediate stop >/dev/null
say "10 payments taken, the cluster lost; restoring to the point between the batches"

# --- Restore: the base backup, the archive, the restore point.
as_postgres cp -a "$work/base" "$work/restored"
cat >>"$work/restored/postgresql.conf" <<EOF
restore_command = 'cp $work/archive/%f %p'
recovery_target_name = 'before-batch-b'
recovery_target_action = 'promote'
EOF
as_postgres touch "$work/restored/recovery.signal"
as_postgres "$pg/pg_ctl" -D "$work/restored" -l "$work/restored.log" -w start >/dev/null
for _ in $(seq 100); do [ "$(sql 'SELECT pg_is_in_recovery()' 2>/dev/null)" = f ] && break; sleep 0.2; done
[ "$(sql 'SELECT pg_is_in_recovery()')" = f ] || fail "the restored cluster did not promote"

in_list() { local IFS=,; echo "'$*'"; }
kept_a=$(sql "SELECT count(*) FROM idempotency_keys WHERE key::text IN ($(in_list "${keys_a[@]}" | sed "s/,/','/g"))")
kept_b=$(sql "SELECT count(*) FROM idempotency_keys WHERE key::text IN ($(in_list "${keys_b[@]}" | sed "s/,/','/g"))")
payments=$(sql "SELECT count(*) FROM payments")
[ "$kept_a" = 5 ] && [ "$kept_b" = 0 ] && [ "$payments" = 5 ] \
  || fail "restored: $kept_a of A's keys, $kept_b of B's, $payments payments (want 5, 0, 5)"
say "restored: A's 5 keys and payments kept, B's 5 lost"

# --- Before reopening: the bank's settlement file names what the database lost.
curl -sf "http://127.0.0.1:$bank_port/settlement" >"$work/settlement.csv"
"$backend" settle "$work/settlement.csv" >"$work/settle.out"
unknown=$(grep -c '^unknown reference: ' "$work/settle.out" || true)
grep -q '^resolved 0, already final 5, mismatched 0, unknown references 5$' "$work/settle.out" \
  || fail "backend settle: $(cat "$work/settle.out")"
say "backend settle: 5 already final (A), $unknown unknown references (B's debits, for the procedure)"

# --- Reopened: A replays; a retry of a lost B key pays again (the hazard).
serve
for i in 0 1 2 3 4; do
  key=${keys_a[$i]}
  [ "$(pay "$key" "a-$((i + 1))")" = 201 ] && cmp -s "$work/reply-$key" "$work/first-$key" \
    || fail "A's key $((i + 1)) did not replay its reply byte for byte: $(cat "$work/reply-$key")"
done
[ "$(pay "${keys_b[0]}" b-1)" = 201 ] || fail "the retry of a lost key: $(cat "$work/reply-${keys_b[0]}")"
[ "$(debits)" = 11 ] || fail "the bank holds $(debits) debits, not 11"
say "the retry of a lost key debited again (11 debits for 10 actions): why the procedure reopens only after settling"
say "passed in $((SECONDS - started)) s"
