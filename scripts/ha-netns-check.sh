#!/usr/bin/env bash
# Checks the network-namespace mode of scripts/ha-cluster.sh: brings a cluster up with
# `up --netns` in a throwaway HA_DIR (namespaces hachk-*, subnet 10.232.0.0/24 unless
# HA_NETNS_PREFIX / HA_NETNS_SUBNET say otherwise), strikes each nemesis, observes what the
# cluster does, heals, waits for it to be whole again, and prints a short report with the
# measurements (failover times, latency ratios). Takes it down at the end, whatever happens.
# Exits 1 when an expectation failed. Runs as root, about four minutes (plus building
# tests/harness's nfqueue-delay the first time, which slow-db-link needs).
#
#   scripts/ha-netns-check.sh
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ha=$here/ha-cluster.sh
export HA_DIR=${HA_DIR:-/tmp/ha-netns-check-$$}
export HA_NETNS_PREFIX=${HA_NETNS_PREFIX:-hachk}
export HA_NETNS_SUBNET=${HA_NETNS_SUBNET:-10.232.0.0/24}
net=${HA_NETNS_SUBNET%.0/24}
work=$(mktemp -d /tmp/ha-netns-check-work.XXXXXX)
report=()
failures=0

cleanup() {
  local job
  for job in $(jobs -p); do kill "$job" 2>/dev/null || true; done
  "$ha" down >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

log() { echo "ha-netns-check: $*" >&2; }
note() { report+=("$*"); log "$*"; }
ok() { note "ok    $*"; }
fail() { note "FAIL  $*"; failures=$((failures + 1)); }
now() { date +%s.%N; }
since() { awk -v from="$1" -v to="$(now)" 'BEGIN { printf "%.1f", to - from }'; }

# The first line of NODE's Patroni log from FROM (epoch seconds) on matching PATTERN, as
# "SECONDS-AFTER-FROM: MESSAGE", or "never".
patroni_event() {
  local node=$1 pattern=$2 from=$3 line at
  line=$(awk -v from="$(date -u -d "@${from%.*}" '+%Y-%m-%d %H:%M:%S')" -v pattern="$pattern" \
    'substr($0, 1, 19) >= from && $0 ~ pattern { print; exit }' "$HA_DIR/$node-log/patroni.log" 2>/dev/null || true)
  [ -n "$line" ] || { echo never; return 0; }
  at=$(date -u -d "$(cut -c1-23 <<<"$line" | tr , .)" +%s.%N)
  awk -v at="$at" -v from="$from" -v message="${line#*: }" 'BEGIN { printf "%.1fs: %s", at - from, message }'
}
node_addr() { echo "$net.$((10 + ${1#node}))"; }
hap_addr() { echo "$net.$((20 + $1))"; }
# HTTP status of Patroni's REST path on NODE (000: no reply within a second).
rest() { curl -s -o /dev/null -m 1 -w '%{http_code}' "http://$(node_addr "$1"):8008/$2" || true; }
# SQL in ROLE's namespace through HAProxy I, bounded by SECONDS.
sql_via() {
  local role=$1 i=$2 seconds=$3
  shift 3
  timeout "$seconds" "$ha" exec "$role" -- psql "postgresql://postgres@$(hap_addr "$i"):5432/payments?connect_timeout=5" \
    -v ON_ERROR_STOP=1 -Atqc "$1"
}
# Whether ROLE's namespace opens a TCP connection to ADDR:PORT within 3 s.
connects() { timeout 3 "$ha" exec "$1" -- bash -c "exec 3<>/dev/tcp/$2/$3" 2>/dev/null; }
healthy_again() {
  local from
  from=$(now)
  if "$ha" wait-healthy 120 all >/dev/null 2>&1; then
    ok "$1: healed, whole again (leader and every standby streaming) in $(since "$from")s"
  else
    local stuck
    stuck=$("$ha" reinit-stuck 2>/dev/null | tr '\n' ' ')
    if "$ha" wait-healthy 120 all >/dev/null 2>&1; then
      fail "$1: not whole within 120s by itself; whole after reinit-stuck (${stuck:-nothing re-cloned})"
    else
      fail "$1: not whole after heal, even after reinit-stuck"
      "$ha" status >&2 || true
    fi
  fi
}

# From the backend1 namespace through HAProxy 1: the mean milliseconds of 20 `SELECT 1` on one
# connection (pgbench), and the median of 10 one-shot psql runs (connect, SELECT 1, quit).
measure() {
  local statement one_shot from to
  statement=$(timeout 120 ip netns exec "$backend1_ns" pgbench -n -f "$work/select1.sql" -t 20 -c 1 \
    -h "$(hap_addr 1)" -U postgres payments 2>/dev/null | awk '/latency average/ { print $4 }' || true)
  one_shot=$(for _ in $(seq 1 10); do
    from=$(date +%s%N)
    timeout 30 ip netns exec "$backend1_ns" psql "postgresql://postgres@$(hap_addr 1):5432/payments" \
      -Atqc "SELECT 1" >/dev/null 2>&1 || true
    to=$(date +%s%N)
    echo $(((to - from) / 1000000))
  done | sort -n | awk '{ at[NR] = $1 } END { print (at[5] + at[6]) / 2 }')
  echo "${statement:-nan} $one_shot"
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b > 0) printf "%.0f", a / b; else print "?" }'; }

# --- up -------------------------------------------------------------------------------------
from=$(now)
printed=$("$ha" up --netns 2>"$work/up.log") || { cat "$work/up.log" >&2; fail "up --netns failed"; exit 1; }
database_url=$(tail -n 1 <<<"$printed")
backend_lines=$(grep -c '^BACKEND_NS=' <<<"$printed" || true)
bank_addr=$(sed -n 's/^BANK_NS=[^ ]* BIND=//p' <<<"$printed")
backend1_addr=$(sed -n 's/^BACKEND_NS=[^ ]*backend1 .* BIND=//p' <<<"$printed")
backend1_ns=$(sed -n 's/^BACKEND_NS=\([^ ]*backend1\) .*/\1/p' <<<"$printed")
if [ "$database_url" = "postgres://postgres@$(hap_addr 1):5432/payments" ] && [ "$backend_lines" = 2 ] \
  && [ -n "$bank_addr" ] && [ -n "$backend1_addr" ] && [ "$backend1_ns" = "$HA_NETNS_PREFIX-backend1" ]; then
  ok "up --netns in $(since "$from")s; leader $("$ha" leader); last line $database_url"
else
  fail "up --netns printed unexpected lines: $printed"
fi
psql "$database_url" -qc "CREATE TABLE ha_check (tag text NOT NULL, at timestamptz NOT NULL DEFAULT now())"
echo "SELECT 1;" >"$work/select1.sql"
if "$ha" status >"$work/status.txt" 2>&1 && grep -q "hap2" "$work/status.txt"; then
  ok "status shows both HAProxys"
else
  fail "status: $(cat "$work/status.txt")"
fi

# --- isolate-backend alone --------------------------------------------------------------------
lead=$("$ha" nemesis isolate-backend 1)
standby=node1
[ "$lead" = node1 ] && standby=node2
setsid "$ha" exec backend1 -- python3 -m http.server --bind "$backend1_addr" 18080 >/dev/null 2>&1 &
disown
for _ in $(seq 1 50); do curl -sf -m 1 -o /dev/null "http://$backend1_addr:18080/" && break; sleep 0.1; done
checks=""
[ "$(sql_via backend1 1 10 "SELECT 1" 2>/dev/null)" = 1 ] || checks+=" backend1-via-hap1-to-leader-fails"
connects backend1 "$(node_addr "$standby")" 5432 && checks+=" backend1-reaches-$standby"
connects backend1 "$(node_addr "$lead")" 5432 && checks+=" backend1-reaches-$lead-directly"
connects backend1 "$(hap_addr 2)" 5432 && checks+=" backend1-reaches-hap2"
connects hap1 "$(node_addr "$standby")" 8008 && checks+=" hap1-reaches-$standby"
connects hap1 "$(node_addr "$lead")" 8008 || checks+=" hap1-lost-$lead"
curl -sf -m 2 -o /dev/null "http://$backend1_addr:18080/" || checks+=" root-cannot-reach-backend1"
connects backend2 "$(node_addr "$standby")" 5432 || checks+=" backend2-cut-too"
"$ha" heal isolate-backend
connects backend1 "$(node_addr "$standby")" 5432 || checks+=" still-cut-after-heal"
if [ -z "$checks" ]; then
  ok "isolate-backend 1 (alone): backend1 reaches hap1 (so $lead) and is reached from root; not etcd, nodes, hap2; hap1 reaches $lead only; healed"
else
  fail "isolate-backend 1 (alone):$checks"
fi

# --- isolate-leader with backend 1 kept on the old leader (split brain) ------------------------
from=$(now)
old=$("$ha" nemesis isolate-leader)
"$ha" nemesis isolate-backend 1 "$old" >/dev/null
# A write through the isolated side: its commit cannot reach the synchronous standby.
(
  started=$(now)
  if sql_via backend1 1 90 "INSERT INTO ha_check (tag) VALUES ('isolated')" >"$work/isolated.out" 2>&1; then
    echo "0 $(since "$started")" >"$work/isolated.rc"
  else
    echo "$? $(since "$started")" >"$work/isolated.rc"
  fi
) &
demoted="" elected="" new="" both=0
for _ in $(seq 1 180); do
  primaries="" old_status=""
  for n in node1 node2 node3; do
    code=$(rest "$n" primary)
    [ "$code" = 200 ] && primaries+=" $n"
    [ "$n" = "$old" ] && old_status=$code
  done
  # Demoted: its Patroni replies, and not 200 (000 would be no reply within the second).
  [ -z "$demoted" ] && [ "$old_status" != 200 ] && [ "$old_status" != 000 ] && demoted=$(since "$from")
  for n in $primaries; do
    [ "$n" != "$old" ] && [ -z "$elected" ] && { elected=$(since "$from"); new=$n; }
  done
  [ "$(wc -w <<<"$primaries")" -ge 2 ] && both=$((both + 1))
  [ -n "$demoted" ] && [ -n "$elected" ] && break
  sleep 0.5
done
written=""
if [ -n "$elected" ]; then
  for _ in $(seq 1 60); do
    if sql_via backend2 2 10 "INSERT INTO ha_check (tag) VALUES ('after-failover')" >/dev/null 2>&1; then
      written=$(since "$from")
      break
    fi
    sleep 1
  done
fi
for _ in $(seq 1 200); do [ -f "$work/isolated.rc" ] && break; sleep 0.5; done
read -r isolated_rc isolated_took <"$work/isolated.rc" || isolated_rc=missing
note "info  isolate-leader: $old's Patroni (it then stops PostgreSQL: sessions cut, new ones refused): $(patroni_event "$old" "demoting self" "$from")"
if [ -n "$demoted" ]; then ok "isolate-leader: old leader $old demoted (REST /primary not 200) after ${demoted}s"; else fail "isolate-leader: $old still primary after 90s"; fi
if [ -n "$elected" ]; then ok "isolate-leader: $new elected leader after ${elected}s"; else fail "isolate-leader: no new leader within 90s"; fi
if [ "$both" = 0 ]; then ok "isolate-leader: never two nodes replying 200 on /primary at once (polled every 0.5s)"; else fail "isolate-leader: two primaries at once in $both polls"; fi
if [ -n "$written" ]; then ok "isolate-leader: a write through hap2 (backend2) committed ${written}s after the strike"; else fail "isolate-leader: no write through hap2 within 60s of the election"; fi
if [ "$isolated_rc" != 0 ] && [ "$isolated_rc" != missing ]; then
  ok "isolate-leader: the write through hap1 (reaching $old only) was not acknowledged: psql exit $isolated_rc after ${isolated_took}s ($(tr '\n' ' ' <"$work/isolated.out" | cut -c1-120))"
else
  fail "isolate-leader: the write through the isolated leader was acknowledged ($isolated_rc)"
fi
"$ha" heal
healthy_again isolate-leader
counts=$(psql "$database_url" -Atqc "SELECT count(*) FILTER (WHERE tag = 'isolated') || ' ' || count(*) FILTER (WHERE tag = 'after-failover') FROM ha_check")
read -r isolated_rows failover_rows <<<"$counts"
if [ "$failover_rows" = 1 ]; then
  ok "isolate-leader: the acknowledged write through hap2 survived the heal"
else
  fail "isolate-leader: acknowledged writes after heal: $failover_rows (expected 1)"
fi
note "info  isolate-leader: rows of the unacknowledged write after the old leader rejoined: $isolated_rows (0: rewound away)"

# --- cut-sync-standby -------------------------------------------------------------------------
lead=$("$ha" leader)
from=$(now)
sync=$("$ha" nemesis cut-sync-standby)
(
  if sql_via backend1 1 150 "INSERT INTO ha_check (tag) VALUES ('sync-cut')" >/dev/null 2>&1; then
    echo "0 $(since "$from")" >"$work/sync.rc"
  else
    echo "$? $(since "$from")" >"$work/sync.rc"
  fi
) &
moved=""
for _ in $(seq 1 320); do
  if [ -z "$moved" ]; then
    for n in node1 node2 node3; do
      [ "$n" != "$sync" ] && [ "$n" != "$lead" ] && [ "$(rest "$n" synchronous)" = 200 ] && moved="$(since "$from")s ($n)"
    done
  fi
  [ -n "$moved" ] && [ -f "$work/sync.rc" ] && break
  sleep 0.5
done
read -r sync_rc sync_took <"$work/sync.rc" 2>/dev/null || sync_rc=missing
if [ "$sync_rc" = 0 ]; then
  ok "cut-sync-standby: $sync cut from $lead; a write through hap1 was acknowledged after ${sync_took}s; other standby recorded synchronous after ${moved:-never}"
  note "info  cut-sync-standby: $lead's Patroni: $(patroni_event "$lead" "Assigning synchronous standby" "$from"); $(patroni_event "$lead" "Disabled synchronous" "$from")"
else
  fail "cut-sync-standby: $sync cut from $lead; the write was not acknowledged within 150s (exit $sync_rc); synchronous moved: ${moved:-never}"
fi
"$ha" heal
healthy_again cut-sync-standby

# --- lossy and slow database links -------------------------------------------------------------
read -r base_stmt base_conn <<<"$(measure)"
"$ha" nemesis lossy-db-link 30
read -r lossy_stmt lossy_conn <<<"$(measure)"
"$ha" heal lossy-db-link
"$ha" nemesis slow-db-link 200 100
read -r slow_stmt slow_conn <<<"$(measure)"
delayed=$(tr '\n' ' ' <"$HA_DIR/delay-backend1.log" 2>/dev/null || true)
"$ha" heal
read -r healed_stmt healed_conn <<<"$(measure)"
note "info  SELECT 1 from backend1 through hap1, ms: mean of 20 on one connection / median of 10 one-shot psql runs:"
note "info    baseline $base_stmt / $base_conn; lossy 30% $lossy_stmt / $lossy_conn (x$(ratio "$lossy_stmt" "$base_stmt") / x$(ratio "$lossy_conn" "$base_conn")); slow 200+-100 ms $slow_stmt / $slow_conn (x$(ratio "$slow_stmt" "$base_stmt") / x$(ratio "$slow_conn" "$base_conn")); healed $healed_stmt / $healed_conn"
note "info    delayer: $delayed"
# Each statement is one round trip, each packet delayed 100..300 ms each way: 200..600 ms.
if awk -v s="$slow_stmt" 'BEGIN { exit !(s >= 250 && s <= 700) }'; then ok "slow-db-link: $slow_stmt ms per statement (two delays of 200+-100 ms)"; else fail "slow-db-link: $slow_stmt ms per statement, expected about 400"; fi
if awk -v l="$lossy_stmt" -v b="$base_stmt" 'BEGIN { exit !(l > 2 * b) }'; then ok "lossy-db-link: statements slower under loss (retransmissions)"; else fail "lossy-db-link: no slowdown ($lossy_stmt vs $base_stmt ms)"; fi
if awk -v h="$healed_stmt" -v b="$base_stmt" 'BEGIN { exit !(h < 5 * b + 1) }'; then ok "heal: latency back to baseline ($healed_stmt ms)"; else fail "heal: latency still $healed_stmt ms"; fi

# --- cut-bank-link ----------------------------------------------------------------------------
setsid "$ha" exec bank -- python3 -m http.server --bind "$bank_addr" 18081 >/dev/null 2>&1 &
disown
for _ in $(seq 1 50); do curl -sf -m 1 -o /dev/null "http://$bank_addr:18081/" && break; sleep 0.1; done
bank() { timeout 5 "$ha" exec "$1" -- curl -sf -m 2 -o /dev/null "http://$bank_addr:18081/"; }
checks=""
bank backend1 || checks+=" backend1-no-bank-before"
"$ha" nemesis cut-bank-link
bank backend1 && checks+=" backend1-reaches-bank"
bank backend2 && checks+=" backend2-reaches-bank"
curl -sf -m 2 -o /dev/null "http://$bank_addr:18081/" || checks+=" root-lost-bank"
"$ha" heal cut-bank-link
bank backend2 || checks+=" backend2-no-bank-after-heal"
if [ -z "$checks" ]; then ok "cut-bank-link: backends cut from the bank, root not; healed"; else fail "cut-bank-link:$checks"; fi

# --- down -------------------------------------------------------------------------------------
promotions=$("$ha" history | python3 -c 'import json, sys; print(len(json.load(sys.stdin)))' || echo none)
if [ "$promotions" -ge 1 ] 2>/dev/null; then ok "history: $promotions promotion(s) recorded"; else fail "history: $promotions"; fi
"$ha" down 2>/dev/null
left=$(ip netns list | grep -c "^$HA_NETNS_PREFIX-" || true)
bridge=$( (ip link show "${HA_NETNS_PREFIX}br" 2>/dev/null || true) | wc -l)
if [ "$left" = 0 ] && [ "$bridge" = 0 ] && [ ! -e "$HA_DIR" ] && "$ha" down 2>/dev/null; then
  ok "down: namespaces, bridge and scratch folder gone (and down again is harmless)"
else
  fail "down left $left namespaces, bridge lines $bridge"
fi

echo
echo "ha-netns-check report:"
printf '  %s\n' "${report[@]}"
[ "$failures" = 0 ] || { echo "  $failures check(s) failed"; exit 1; }
