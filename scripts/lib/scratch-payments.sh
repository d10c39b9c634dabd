# Sourced by the database-loss checks (scripts/backup-restore.sh, scripts/dr-promotion.sh): the
# parts they share. A PostgreSQL cluster of their own in a scratch folder on free loopback
# ports, the bank simulator, the backend in development mode (its published secret, no edge
# proof) and a phone's calls. The caller sets `check` (its name, for messages) before sourcing;
# everything started is stopped and the scratch folder removed on exit. Needs the workspace's
# binaries built (cargo build --workspace --bins).

fail() { echo "$check: FAILED: $*" >&2; exit 1; }
say() { echo "$check: $*"; }

pg_version=$(ls /usr/lib/postgresql | sort -V | tail -n 1)
pg=/usr/lib/postgresql/$pg_version/bin
backend=$PWD/target/debug/backend
bank_simulator=$PWD/target/debug/bank-simulator
for binary in "$backend" "$bank_simulator" "$pg/initdb" "$pg/pg_basebackup"; do
  [ -x "$binary" ] || fail "$binary is missing (cargo build --workspace --bins; PostgreSQL)"
done

work=$(mktemp -d "/tmp/$check.XXXXXX")
chown postgres "$work"
pids=()
clusters=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for data in "${clusters[@]}"; do
    [ -f "$work/$data/postmaster.pid" ] && runuser -u postgres -- "$pg/pg_ctl" -D "$work/$data" -m immediate stop >/dev/null 2>&1
  done
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
as_postgres() { runuser -u postgres -- "$@"; }

# `new_cluster NAME PORT [SETTING...]`: initdb in $work/NAME, listening on 127.0.0.1:PORT, with
# each extra `postgresql.conf` line; started. Stopped on exit.
new_cluster() {
  local name=$1 port=$2
  shift 2
  as_postgres "$pg/initdb" -D "$work/$name" -A trust -U postgres >/dev/null
  printf '%s\n' "port = $port" "listen_addresses = '127.0.0.1'" \
    "unix_socket_directories = '$work'" "$@" >>"$work/$name/postgresql.conf"
  start_cluster "$name"
}

# `start_cluster NAME`: starts the cluster in $work/NAME (stopped on exit); if it does not
# start, its server log is printed before the failure (the scratch directory goes with it).
start_cluster() {
  clusters+=("$1")
  as_postgres "$pg/pg_ctl" -D "$work/$1" -l "$work/$1.log" -w start >/dev/null \
    || { tail -n 30 "$work/$1.log" >&2; fail "the cluster $1 did not start"; }
}

# `sql_at PORT QUERY`: one query on the `payments` database of the cluster on PORT.
sql_at() { "$pg/psql" -h 127.0.0.1 -p "$1" -U postgres -d payments -qAtX -c "$2"; }

# The bank simulator, with dedupe on (its default).
bank_port=$(free_port)
start_bank() {
  "$bank_simulator" --listen "127.0.0.1:$bank_port" >"$work/bank.log" 2>&1 &
  pids+=($!)
}
debits() { curl -sf "http://127.0.0.1:$bank_port/ledger" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["debits"]))'; }
# `bank_knob NAME JSON-VALUE`: sets one of the bank's knobs, leaving the others.
bank_knob() {
  curl -sf "http://127.0.0.1:$bank_port/knobs" \
    | python3 -c "import json,sys; k=json.load(sys.stdin); k['$1']=json.loads('$2'); print(json.dumps(k))" \
    | curl -sf -X PUT -H 'content-type: application/json' -d @- "http://127.0.0.1:$bank_port/knobs" >/dev/null
}

# `serve DATABASE_URL`: the backend's schema migrated and one replica serving on $api_port
# (killed on exit; `stop_backend` stops the latest).
api_port=$(free_port)
serve() {
  export DATABASE_URL=$1 APP_ENV=development BANK_URL="http://127.0.0.1:$bank_port" \
    POLICY_FILE=$PWD/policy.yaml RUST_LOG=warn
  "$backend" migrate >/dev/null
  LISTEN_ADDR="127.0.0.1:$api_port" ADMIN_ADDR="127.0.0.1:$(free_port)" "$backend" serve \
    >>"$work/backend.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do
    curl -sf "http://127.0.0.1:$api_port/readyz" >/dev/null && return
    sleep 0.1
  done
  fail "the backend did not become ready: $(tail -5 "$work/backend.log")"
}
stop_backend() { kill "${pids[-1]}"; wait "${pids[-1]}" 2>/dev/null || true; }

# `pay KEY BILL`: a phone's payment of 1500 paise, sent with its key → the reply's status, its
# body in $work/reply-KEY.
pay() {
  [ -n "${token:-}" ] || token=$("$backend" dev-token --user "$check")
  curl -s -o "$work/reply-$1" -w '%{http_code}' -X POST "http://127.0.0.1:$api_port/v1/bills/$2/pay" \
    -H "Authorization: Bearer $token" -H "Idempotency-Key: $1" -H 'content-type: application/json' \
    -d '{"amount_paise":1500,"payer_vpa":"asha@okbank"}'
}
# `reply_field KEY FIELD`: a field of the last reply to KEY.
reply_field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$work/reply-$1" "$2"; }
# `quoted_list WORD...`: 'a','b',… for an SQL IN list.
quoted_list() { local IFS=,; local items=("${@/#/\'}"); items=("${items[@]/%/\'}"); echo "${items[*]}"; }

# `paid_batch ARRAY PREFIX COUNT`: COUNT new keys paid for bills PREFIX-1… (each must be a 201),
# appended to the array named ARRAY, each first reply kept as $work/first-KEY.
paid_batch() {
  local -n batch=$1
  local prefix=$2 count=$3 i key
  for i in $(seq "$count"); do
    key=$(cat /proc/sys/kernel/random/uuid)
    batch+=("$key")
    [ "$(pay "$key" "$prefix-$i")" = 201 ] || fail "payment $prefix-$i: $(cat "$work/reply-$key")"
    cp "$work/reply-$key" "$work/first-$key"
  done
}

# `replays_byte_for_byte PREFIX KEY...`: each key, paid again for its bill PREFIX-N, replays its
# first reply byte for byte.
replays_byte_for_byte() {
  local prefix=$1 i=0 key
  shift
  for key in "$@"; do
    i=$((i + 1))
    [ "$(pay "$key" "$prefix-$i")" = 201 ] && cmp -s "$work/reply-$key" "$work/first-$key" \
      || fail "$prefix-$i did not replay its reply byte for byte: $(cat "$work/reply-$key")"
  done
}
