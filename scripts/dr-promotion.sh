#!/usr/bin/env bash
# A region lost, tried (docs/procedures/promote-the-disaster-recovery-copy.md): the primary
# streams its WAL asynchronously to a disaster-recovery standby, as a copy in another region
# would (synchronous commit across regions is too slow). Batch A commits and reaches the copy.
# Then the link to the copy stalls (the primary's WAL sender is stopped) while batch B is paid
# and acknowledged (201), and batch C is sent to the bank, which debits and whose replies are
# lost (the keys are left `unknown`). The region is lost; the copy is promoted; a backend opens
# on it and the phones retry. What the check proves:
# - the copy kept A and lost every B and C key and payment (the commits asynchronous
#   replication loses);
# - every retry of a lost key is a 201 under the reference of its first claim (the id is the
#   request's, shared/src/movement_id.rs), and the bank, which dedupes references, replies with
#   its first outcome: 0 double debits, and every lost payment rebuilt from the bank's reply,
#   one succeeded payment per debit in the ledger;
# - the bank's half of the promise: with the bank's dedupe off, the retry of one more lost key
#   debits a second time.
# Shared parts: scripts/lib/scratch-payments.sh. Called by tests/run-all.sh; needs the
# workspace's binaries built (cargo build --workspace --bins).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
started=$SECONDS
check=dr-promotion
source scripts/lib/scratch-payments.sh

# --- The primary, its asynchronous copy, the bank, the backend on the primary.
primary_port=$(free_port)
copy_port=$(free_port)
new_cluster primary "$primary_port" "wal_level = replica" "max_wal_senders = 4"
"$pg/createdb" -h 127.0.0.1 -p "$primary_port" -U postgres payments
as_postgres "$pg/pg_basebackup" -h 127.0.0.1 -p "$primary_port" -U postgres -D "$work/copy" \
  -X stream -c fast -R
echo "port = $copy_port" >>"$work/copy/postgresql.conf"
start_cluster copy
start_bank
serve "postgres://postgres@127.0.0.1:$primary_port/payments"

keys_a=() keys_b=() keys_c=()
paid_batch keys_a a 5
# Until the copy has replayed everything the primary wrote.
target=$(sql_at "$primary_port" "SELECT pg_current_wal_lsn()")
for _ in $(seq 100); do
  [ "$(sql_at "$copy_port" "SELECT pg_last_wal_replay_lsn() >= '$target'::pg_lsn")" = t ] && break
  sleep 0.1
done
[ "$(sql_at "$copy_port" "SELECT count(*) FROM payments")" = 5 ] || fail "the copy did not catch up with A"

# --- The link to the copy stalls; B is acknowledged, C's bank replies are lost.
postmaster=$(head -n 1 "$work/primary/postmaster.pid")
walsenders=$(pgrep -P "$postmaster" -f walsender) || fail "the primary has no WAL sender"
# shellcheck disable=SC2086
kill -STOP $walsenders
paid_batch keys_b b 5
bank_knob lost_reply_rate 1.0
for i in 1 2 3; do
  key=$(cat /proc/sys/kernel/random/uuid); keys_c+=("$key")
  status=$(pay "$key" "c-$i")
  [ "$status" != 201 ] || fail "batch C payment $i was acknowledged though its bank reply was lost"
done
bank_knob lost_reply_rate 0.0
unknown_c=$(sql_at "$primary_port" "SELECT count(*) FROM idempotency_keys WHERE state = 'unknown'")
[ "$(debits)" = 13 ] || fail "the bank holds $(debits) debits, not 13 (5 A, 5 B, 3 C)"
say "13 debits at the bank: A replicated, B acknowledged and C ($unknown_c keys unknown) only on the primary"

# --- The region is lost; the copy is promoted.
stop_backend
as_postgres "$pg/pg_ctl" -D "$work/primary" -m immediate stop >/dev/null
kill -CONT $walsenders 2>/dev/null || true
as_postgres "$pg/pg_ctl" -D "$work/copy" -w promote >/dev/null
for _ in $(seq 100); do [ "$(sql_at "$copy_port" 'SELECT pg_is_in_recovery()')" = f ] && break; sleep 0.1; done
[ "$(sql_at "$copy_port" 'SELECT pg_is_in_recovery()')" = f ] || fail "the copy did not promote"
kept=$(sql_at "$copy_port" "SELECT count(*) FROM idempotency_keys")
payments=$(sql_at "$copy_port" "SELECT count(*) FROM payments")
[ "$kept" = 5 ] && [ "$payments" = 5 ] || fail "the copy holds $kept keys and $payments payments, not A's 5 and 5"
say "promoted: A's 5 keys kept; B's 5 and C's 3 lost with the region"

# --- The phones retry on the promoted copy.
serve "postgres://postgres@127.0.0.1:$copy_port/payments"
replays_byte_for_byte a "${keys_a[@]}"
for i in 0 1 2 3 4; do
  key=${keys_b[$i]}
  cp "$work/first-$key" "$work/reply-first"
  [ "$(pay "$key" "b-$((i + 1))")" = 201 ] || fail "the retry of B's key $((i + 1)): $(cat "$work/reply-$key")"
  for field in payment_id bank_reference amount_paise; do
    [ "$(reply_field "$key" $field)" = "$(reply_field first $field)" ] \
      || fail "B's key $((i + 1)) was rebuilt with $field $(reply_field "$key" $field), not $(reply_field first $field)"
  done
done
for i in 0 1; do
  key=${keys_c[$i]}
  [ "$(pay "$key" "c-$((i + 1))")" = 201 ] || fail "the retry of C's key $((i + 1)): $(cat "$work/reply-$key")"
done
[ "$(debits)" = 13 ] || fail "after the retries the bank holds $(debits) debits, not 13"
# Every debit in the ledger is one succeeded payment of the same reference and amount.
curl -sf "http://127.0.0.1:$bank_port/ledger" >"$work/ledger.json"
sql_at "$copy_port" "SELECT bank_reference, amount_paise FROM payments WHERE status = 'succeeded'" \
  | sort >"$work/books.txt"
python3 -c 'import json,sys
for d in json.load(open(sys.argv[1]))["debits"]: print(d["reference"] + "|" + str(d["amount_paise"]))' \
  "$work/ledger.json" | sort >"$work/debited.txt"
# C's third key is not retried yet, so the books lack exactly its debit.
missing=$(comm -13 "$work/books.txt" "$work/debited.txt" | wc -l)
extra=$(comm -23 "$work/books.txt" "$work/debited.txt" | wc -l)
[ "$missing" = 1 ] && [ "$extra" = 0 ] \
  || fail "books and ledger differ: $missing debits not in the books (want 1), $extra payments not debited"
say "retries: 5 B and 2 C rebuilt under their first references, 13 debits for 13 actions, books match the ledger"

# --- The bank's half: with dedupe off, the last lost key debits again.
bank_knob dedupe false
[ "$(pay "${keys_c[2]}" c-3)" = 201 ] || fail "the retry of C's key 3: $(cat "$work/reply-${keys_c[2]}")"
[ "$(debits)" = 14 ] || fail "with dedupe off the bank holds $(debits) debits, not 14"
say "with the bank's dedupe off, the retry of C's key 3 debited a second time (14 debits for 13 actions)"
say "passed in $((SECONDS - started)) s"
