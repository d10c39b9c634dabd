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
# - a phone's retry of a lost B key claims it again under the same reference (the id is the
#   request's, shared/src/movement_id.rs), so the bank, which dedupes references, replies with
#   its first outcome: the payment is rebuilt with its first id and no second debit is made.
# Shared parts: scripts/lib/scratch-payments.sh. Called by tests/run-all.sh; needs the
# workspace's binaries built (cargo build --workspace --bins).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
started=$SECONDS
check=backup-restore
source scripts/lib/scratch-payments.sh

# --- A cluster that archives its WAL, the bank, the backend.
port=$(free_port)
sql() { sql_at "$port" "$1"; }
as_postgres mkdir "$work/archive"
# The copy lands under a temporary name and is renamed: a segment is in the archive whole or
# not at all (a plain `cp` let the check below see a half-copied segment as archived, and the
# restore then refused it for its size, about one run in twenty).
new_cluster primary "$port" "wal_level = replica" "archive_mode = on" \
  "archive_command = 'test ! -f $work/archive/%f && cp %p $work/archive/%f.partial && mv $work/archive/%f.partial $work/archive/%f'"
"$pg/createdb" -h 127.0.0.1 -p "$port" -U postgres payments
start_bank
serve "postgres://postgres@127.0.0.1:$port/payments"

# --- The backup, batch A, the restore point, batch B.
as_postgres "$pg/pg_basebackup" -h 127.0.0.1 -p "$port" -U postgres -D "$work/base" -X stream -c fast
keys_a=() keys_b=()
paid_batch keys_a a 5
sql "SELECT pg_create_restore_point('before-batch-b')" >/dev/null
paid_batch keys_b b 5
[ "$(debits)" = 10 ] || fail "the bank holds $(debits) debits, not 10"
# The segment holding the restore point is archived; then the cluster is lost.
segment=$(sql "SELECT pg_walfile_name(pg_current_wal_lsn())")
sql "SELECT pg_switch_wal()" >/dev/null
for _ in $(seq 100); do [ -f "$work/archive/$segment" ] && break; sleep 0.1; done
[ -f "$work/archive/$segment" ] || fail "WAL segment $segment was not archived"
stop_backend
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
start_cluster restored
for _ in $(seq 100); do [ "$(sql 'SELECT pg_is_in_recovery()' 2>/dev/null)" = f ] && break; sleep 0.2; done
[ "$(sql 'SELECT pg_is_in_recovery()')" = f ] || fail "the restored cluster did not promote"

kept_a=$(sql "SELECT count(*) FROM idempotency_keys WHERE key::text IN ($(quoted_list "${keys_a[@]}"))")
kept_b=$(sql "SELECT count(*) FROM idempotency_keys WHERE key::text IN ($(quoted_list "${keys_b[@]}"))")
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

# --- Reopened: A replays; a retry of a lost B key is rebuilt under its first reference.
serve "$DATABASE_URL"
replays_byte_for_byte a "${keys_a[@]}"
lost=${keys_b[0]}
cp "$work/first-$lost" "$work/reply-first"
first_reference=$(reply_field first bank_reference)
[ "$(pay "$lost" b-1)" = 201 ] || fail "the retry of a lost key: $(cat "$work/reply-$lost")"
[ "$(reply_field "$lost" bank_reference)" = "$first_reference" ] \
  || fail "the retry of a lost key was made under $(reply_field "$lost" bank_reference), not $first_reference"
[ "$(debits)" = 10 ] || fail "the bank holds $(debits) debits, not 10"
say "the retry of a lost key: 201 under its first reference, 10 debits for 10 actions"
say "passed in $((SECONDS - started)) s"
