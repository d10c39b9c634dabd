#!/usr/bin/env bash
# A local highly available PostgreSQL: three PostgreSQL 15 nodes managed by Patroni, one etcd
# for Patroni's leader election, and HAProxy in front sending every connection to the leader
# only. All on loopback, with their own ports and data folders in a scratch directory, so tests,
# soaks and people drive failover the same way. docs/operations.md ("A database that fails
# over") explains each setting and why a payments team would choose it.
#
#   scripts/ha-cluster.sh install                  # install what the cluster needs, nothing else
#   scripts/ha-cluster.sh up [--strict|--async]   # start; the last line printed is DATABASE_URL
#   scripts/ha-cluster.sh status                   # members, roles, lag; HAProxy's view
#   scripts/ha-cluster.sh leader                   # the leader's name (node1..node3)
#   scripts/ha-cluster.sh history                  # each promotion: timeline, time, new leader (JSON)
#   scripts/ha-cluster.sh kill-leader              # SIGKILL the leader's Patroni and PostgreSQL
#   scripts/ha-cluster.sh start-node NODE          # start a stopped node again (it rejoins)
#   scripts/ha-cluster.sh switchover               # a planned switchover to a synchronous standby
#   scripts/ha-cluster.sh kill-standbys            # SIGKILL every standby node (start-node brings one back)
#   scripts/ha-cluster.sh pause-leader SECONDS     # SIGSTOP the leader node, SIGCONT after SECONDS
#   scripts/ha-cluster.sh freeze-replication       # SIGSTOP the leader's WAL senders
#   scripts/ha-cluster.sh thaw-replication         # SIGCONT them
#   scripts/ha-cluster.sh restart-etcd             # stop etcd and start it again
#   scripts/ha-cluster.sh wait-healthy [SECONDS]   # until a leader and a streaming sync standby
#   scripts/ha-cluster.sh reinit-stuck             # re-clone each standby that does not stream
#   scripts/ha-cluster.sh down [--netns]           # stop everything and remove the scratch folder
#
# Network-namespace mode, to cut, lossify or slow one link at a time (partitions, not only
# crashes); scripts/lib/netns.sh holds its plumbing and nemeses; every command above works in it:
#   scripts/ha-cluster.sh up --netns [--strict|--async] [--backends N]   # N backends, default 2
#   scripts/ha-cluster.sh exec ROLE -- CMD...      # CMD in ROLE's namespace (ip netns exec)
#   scripts/ha-cluster.sh nemesis isolate-leader   # leader cut from etcd and standbys, not HAProxys; prints it
#   scripts/ha-cluster.sh nemesis isolate-backend I [NODE]  # HAProxy I reaches NODE (the leader) only,
#                                                  # backend I reaches HAProxy I and the root namespace only
#   scripts/ha-cluster.sh nemesis cut-sync-standby # synchronous standby cut from the leader; prints it
#   scripts/ha-cluster.sh nemesis lossy-db-link [PERCENT]       # default 30
#   scripts/ha-cluster.sh nemesis slow-db-link [MS] [JITTER_MS] # default 200 100, uniform
#   scripts/ha-cluster.sh nemesis cut-bank-link    # every backend cut from the bank
#   scripts/ha-cluster.sh heal [NEMESIS]           # remove that nemesis, or all; the cluster recovers
# A Linux bridge PREFIXbr joins one namespace per component, each on eth0 with its own
# address: PREFIX-etcd (.10; 2379, 2380), PREFIX-node1..3 (.11-.13; PostgreSQL 5432, Patroni
# REST 8008), one HAProxy per backend PREFIX-hapI (.20+I; 5432, statistics 8404; backend I's
# only way to the database, to the leader only), PREFIX-backendI (.40+I) and PREFIX-bank (.60),
# empty for the caller's processes; the root namespace is .1 (the edge, phones, tests). PREFIX
# is HA_NETNS_PREFIX (default payha, up to 10 letters or digits), the subnet HA_NETNS_SUBNET
# (default 10.231.0.0/24, a /24); a second cluster at once needs both changed. Nemeses are
# iptables rules inside the namespaces: a cut drops every packet both ways; lossy-db-link and
# slow-db-link act on the backends' database link, the packets between each PREFIX-backendI and
# HAProxy I's port 5432, both ways, lossy dropping each with PERCENT% chance (iptables
# statistic), slow holding each MS +- JITTER_MS (this kernel has no netem: NFQUEUE to
# tests/harness/src/bin/nfqueue-delay, built when missing, or HA_NFQUEUE_DELAY). `up --netns`
# ends with one line per backend, then the bank's, then hap1's DATABASE_URL alone:
#   BACKEND_NS=payha-backend1 DATABASE_URL=postgres://postgres@10.231.0.21:5432/payments BIND=10.231.0.41
#   BANK_NS=payha-bank BIND=10.231.0.60
#   postgres://postgres@10.231.0.21:5432/payments
# `down` kills every process in the namespaces, deletes them, the veths and the bridge (`down
# --netns` does so from HA_NETNS_PREFIX alone, should the scratch folder be gone); a failed
# `up --netns` takes itself down.
#
# Replication: `up` is synchronous (Patroni's synchronous_mode: a commit is acknowledged only
# once a standby has it on disk, and only that standby may be promoted); `--strict` adds
# synchronous_mode_strict (with no standby, writes stop rather than go unreplicated); `--async`
# turns synchronous replication off, the setting that loses acknowledged commits on failover,
# kept for the soak's negative control.
#
# Settings (environment): HA_DIR, the scratch folder (default /tmp/payments-ha);
# HA_PORT_BASE (default 15430): HAProxy's write port is the base, the nodes' PostgreSQL
# base+1..3, their Patroni REST APIs base+11..13, etcd base+20 (clients) and base+21 (peers),
# HAProxy's statistics page base+30. Installs etcd-server and haproxy from apt when missing, and
# Patroni 4.1.5 from PyPI into a virtualenv (/opt/patroni-4.1.5, deploy/ha/patroni-requirements.txt
# says why not Debian's). Runs as root; PostgreSQL and Patroni run as the postgres user.
set -euo pipefail

dir=${HA_DIR:-/tmp/payments-ha}
base=${HA_PORT_BASE:-15430}
write_port=$base
etcd_port=$((base + 20))
etcd_peer_port=$((base + 21))
stats_port=$((base + 30))
etcd_host=127.0.0.1
write_host=127.0.0.1
hba_net=127.0.0.1/32
nodes=(node1 node2 node3)
pg_version=$(ls /usr/lib/postgresql | sort -V | tail -n 1)
pg_bin=/usr/lib/postgresql/$pg_version/bin
patroni_home=/opt/patroni-4.1.5
patroni=$patroni_home/bin/patroni
patronictl=$patroni_home/bin/patronictl
database=payments

say() { echo "ha-cluster: $*" >&2; }
# shellcheck source-path=SCRIPTDIR source=lib/netns.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/netns.sh"
[ -f "$dir/netns.env" ] && netns_load

node_addr() { if $netns; then netns_addr "$1"; else echo 127.0.0.1; fi; }
pg_port() { if $netns; then echo 5432; else echo $((base + ${1#node})); fi; }
rest_port() { if $netns; then echo 8008; else echo $((base + 10 + ${1#node})); fi; }
# The HAProxys: one on loopback, one per backend (hap1..) with namespaces.
haproxies() { if $netns; then seq -f 'hap%g' 1 "$netns_backends"; else echo haproxy; fi; }
hap_addr() { if $netns; then netns_addr "$1"; else echo 127.0.0.1; fi; }

install_missing() {
  local missing=()
  command -v etcd >/dev/null || missing+=(etcd-server)
  command -v haproxy >/dev/null || missing+=(haproxy)
  command -v socat >/dev/null || missing+=(socat)
  command -v iptables >/dev/null || missing+=(iptables)
  command -v ip >/dev/null || missing+=(iproute2)
  /usr/bin/python3 -m venv --help >/dev/null 2>&1 || missing+=(python3-venv)
  if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]} from apt"
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null; then
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
  fi
  if [ "$("$patroni" --version 2>/dev/null)" != "patroni 4.1.5" ]; then
    say "installing Patroni 4.1.5 from PyPI into $patroni_home"
    # Debian's Python, not a pyenv one under /root: the postgres user must be able to run it.
    rm -rf "$patroni_home"
    /usr/bin/python3 -m venv "$patroni_home"
    "$patroni_home/bin/pip" install -q --disable-pip-version-check \
      -r "$(dirname "${BASH_SOURCE[0]}")/../deploy/ha/patroni-requirements.txt"
  fi
}

# Starts "$@" detached in a session of its own, output to log file $1, its pid to pid file $2.
start_daemon() {
  local log=$1 pidfile=$2
  shift 2
  setsid "$@" >>"$log" 2>&1 </dev/null &
  echo $! >"$pidfile"
}

alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

start_etcd() {
  # shellcheck disable=SC2046
  start_daemon "$dir/etcd.log" "$dir/etcd.pid" $(ns_exec etcd) etcd --name etcd1 --data-dir "$dir/etcd" \
    --listen-client-urls "http://$etcd_host:$etcd_port" \
    --advertise-client-urls "http://$etcd_host:$etcd_port" \
    --listen-peer-urls "http://$etcd_host:$etcd_peer_port" \
    --initial-advertise-peer-urls "http://$etcd_host:$etcd_peer_port" \
    --initial-cluster "etcd1=http://$etcd_host:$etcd_peer_port" \
    --enable-v2=false
  for _ in $(seq 1 100); do
    curl -sf "http://$etcd_host:$etcd_port/health" >/dev/null && return
    sleep 0.1
  done
  say "etcd did not reply on $etcd_host:$etcd_port (see $dir/etcd.log)"
  return 1
}

# The settings a payments team would choose, each explained in docs/operations.md.
write_patroni_config() {
  local node=$1 mode=$2 sync=true strict=false
  case $mode in
    strict) strict=true ;;
    async) sync=false ;;
  esac
  cat >"$dir/$node.yml" <<YAML
scope: payments
namespace: /payments-ha/
name: $node
log:
  dir: $dir/$node-log
  level: INFO
restapi:
  listen: $(node_addr "$node"):$(rest_port "$node")
  connect_address: $(node_addr "$node"):$(rest_port "$node")
etcd3:
  hosts: $etcd_host:$etcd_port
bootstrap:
  dcs:
    ttl: 20
    loop_wait: 2
    retry_timeout: 5
    maximum_lag_on_failover: 1048576
    failsafe_mode: true
    synchronous_mode: $sync
    synchronous_mode_strict: $strict
    synchronous_node_count: 1
    postgresql:
      use_pg_rewind: true
      use_slots: true
      parameters:
        synchronous_commit: "on"
        wal_level: replica
        hot_standby: "on"
        max_wal_senders: 10
        max_replication_slots: 10
        wal_keep_size: 256MB
        wal_log_hints: "on"
        statement_timeout: 0
  initdb:
    - encoding: UTF8
    - data-checksums
postgresql:
  listen: $(node_addr "$node"):$(pg_port "$node")
  connect_address: $(node_addr "$node"):$(pg_port "$node")
  data_dir: $dir/$node/data
  bin_dir: $pg_bin
  pgpass: $dir/$node/pgpass
  remove_data_directory_on_rewind_failure: true
  remove_data_directory_on_diverged_timelines: true
  parameters:
    unix_socket_directories: $dir/$node
  pg_hba:
    - local all all trust
    - host all all $hba_net trust
    - host replication replicator $hba_net trust
  authentication:
    superuser:
      username: postgres
    replication:
      username: replicator
    rewind:
      username: postgres
YAML
}

start_node() {
  local node=$1
  mkdir -p "$dir/$node" "$dir/$node-log"
  chown -R postgres:postgres "$dir/$node" "$dir/$node-log"
  chmod 700 "$dir/$node"
  # shellcheck disable=SC2046
  start_daemon "$dir/$node-patroni.log" "$dir/$node.pid" \
    $(ns_exec "$node") runuser -u postgres -- "$patroni" "$dir/$node.yml"
}

# HAProxy NAME (haproxy on loopback, hapI with namespaces): $dir/NAME.cfg, .sock, .pid, .log.
write_haproxy_config() {
  local name=$1 node
  {
    cat <<CFG
global
    maxconn 4000
    stats socket $dir/$name.sock mode 600 level admin

defaults
    mode tcp
    retries 2
    timeout connect 2s
    timeout client 30m
    timeout server 30m
    timeout check 1s

# Writes go to the leader only: Patroni's REST API replies 200 on /primary only on the node
# that holds the leader lock. A node that stops being the leader (killed, paused, demoted) is
# marked down after two failed checks a second apart, and its open sessions are closed at once
# (on-marked-down shutdown-sessions), so no connection lingers on a former primary.
listen postgres_primary
    bind $(hap_addr "$name"):$write_port
    option httpchk
    http-check send meth GET uri /primary
    http-check expect status 200
    default-server inter 1s fastinter 500ms downinter 1s fall 2 rise 2 on-marked-down shutdown-sessions
CFG
    for node in "${nodes[@]}"; do
      echo "    server $node $(node_addr "$node"):$(pg_port "$node") maxconn 1000 check port $(rest_port "$node")"
    done
    cat <<CFG

listen stats
    mode http
    bind $(hap_addr "$name"):$stats_port
    stats enable
    stats uri /
CFG
  } >"$dir/$name.cfg"
}

start_haproxy() {
  local name=$1
  haproxy -c -q -f "$dir/$name.cfg"
  # shellcheck disable=SC2046
  start_daemon "$dir/$name.log" "$dir/$name.pid" $(ns_exec "$name") haproxy -db -f "$dir/$name.cfg"
}

# The leader's name, from Patroni's REST API (200 on /primary only at the lock holder).
leader() {
  for node in "${nodes[@]}"; do
    if curl -sf -m 1 -o /dev/null "http://$(node_addr "$node"):$(rest_port "$node")/primary"; then
      echo "$node"
      return
    fi
  done
  return 1
}

standbys() {
  local lead
  lead=$(leader || true)
  for node in "${nodes[@]}"; do
    [ "$node" != "$lead" ] && alive "$dir/$node.pid" && echo "$node"
  done
  return 0
}

postmaster_pid() {
  local pidfile="$dir/$1/data/postmaster.pid"
  [ -f "$pidfile" ] && head -n 1 "$pidfile"
}

# SQL on the leader, through HAProxy.
sql() { psql -h "$write_host" -p "$write_port" -U postgres -d "${2:-postgres}" -Atqc "$1"; }

# Until a leader replies through HAProxy, writable, and (in synchronous modes) a standby that
# Patroni has recorded as synchronous, the only kind it may promote; with "all", every node
# running and streaming too.
wait_healthy() {
  local seconds=${1:-60} need_all=${2:-} mode
  mode=$(cat "$dir/mode" 2>/dev/null || echo sync)
  for _ in $(seq 1 $((seconds * 2))); do
    if [ "$(sql "SELECT NOT pg_is_in_recovery()" 2>/dev/null)" = t ]; then
      local streaming recorded_sync=0 node
      streaming=$(sql "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'" 2>/dev/null || echo 0)
      for node in "${nodes[@]}"; do
        curl -sf -m 1 -o /dev/null "http://$(node_addr "$node"):$(rest_port "$node")/synchronous" \
          && recorded_sync=$((recorded_sync + 1))
      done
      if { [ "$mode" = async ] || [ "$recorded_sync" -ge 1 ]; } \
        && { [ -z "$need_all" ] || [ "${streaming:-0}" -ge $((${#nodes[@]} - 1)) ]; }; then
        return 0
      fi
    fi
    sleep 0.5
  done
  say "the cluster did not become healthy within ${seconds}s"
  status >&2 || true
  for node in "${nodes[@]}"; do
    echo "$node's last Patroni lines:" >&2
    grep -v -e "no action" -e "Lock owner" "$dir/$node-log/patroni.log" 2>/dev/null | tail -n 8 >&2 || true
  done
  return 1
}

# Every member that is neither the leader nor streaming from it, as "NODE STATE" lines. Killed
# nodes are not members (their keys expired); start-node brings them back.
members_not_streaming() {
  "$patronictl" -c "$dir/node1.yml" list -f json 2>/dev/null | "$patroni_home/bin/python" -c '
import json, sys
for member in json.load(sys.stdin):
    if member.get("Role") != "Leader" and member.get("State") != "streaming":
        print(member["Member"], member.get("State", "unknown").replace(" ", "-"))
'
}

# The on-call step for a standby Patroni cannot bring back by itself: re-cloned from the leader
# (patronictl reinit: its data folder removed, a fresh base backup). Upstream reports
# (patroni/patroni#3652, #3648): a former leader whose pg_rewind lost its source half-way (the
# node it rewound from was killed) is started on its half-rewound folder and waits for WAL that
# never comes, "starting" for good; remove_data_directory_on_rewind_failure does not cover a
# source lost mid-rewind. Prints each re-cloned node with the state it was in.
reinit_stuck() {
  local node state
  while read -r node state; do
    [ -n "$node" ] || continue
    "$patronictl" -c "$dir/node1.yml" reinit payments "$node" --force --wait >/dev/null
    echo "$node $state"
  done < <(members_not_streaming)
}

status() {
  local name
  "$patronictl" -c "$dir/node1.yml" list 2>/dev/null || say "patronictl could not list the members"
  for name in $(haproxies); do
    if $netns; then echo "HAProxy $name (postgres_primary):"; else echo "HAProxy (postgres_primary):"; fi
    echo "show stat" | socat - "UNIX-CONNECT:$dir/$name.sock" 2>/dev/null \
      | awk -F, '$1 == "postgres_primary" && $2 ~ /^node/ { print "  " $2 ": " $18 }' \
      || curl -sf "http://$(hap_addr "$name"):$stats_port/;csv" \
      | awk -F, '$1 == "postgres_primary" && $2 ~ /^node/ { print "  " $2 ": " $18 }'
  done
}

# A failed `up --netns` takes down what it made.
up_failed() {
  local status=$?
  [ "$status" = 0 ] && return
  say "up failed (status $status): taking down what it made"
  down
}

up() {
  local mode=sync name
  while [ $# -gt 0 ]; do
    case $1 in
      --strict) mode=strict ;;
      --async) mode=async ;;
      --netns) netns_activate ;;
      --backends) netns_backends=${2:-}; shift ;;
      *) say "unknown option $1"; exit 2 ;;
    esac
    shift
  done
  install_missing
  if alive "$dir/etcd.pid"; then
    say "a cluster already runs in $dir; scripts/ha-cluster.sh down first"
    exit 1
  fi
  local port
  $netns && netns_preflight
  $netns || for port in "$write_port" "$etcd_port" "$etcd_peer_port" "$stats_port" \
    $(for node in "${nodes[@]}"; do echo "$(pg_port "$node") $(rest_port "$node")"; done); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      say "port $port is taken (a cluster of an earlier run? 'down' with its HA_DIR, or another HA_PORT_BASE)"
      exit 1
    fi
  done
  rm -rf "$dir"
  mkdir -p "$dir"
  chmod 755 "$dir"
  if ! runuser -u postgres -- test -x "$dir"; then
    say "the postgres user cannot enter $dir: choose an HA_DIR whose every parent it can enter"
    exit 1
  fi
  echo "$mode" >"$dir/mode"
  if $netns; then
    netns_save
    trap up_failed EXIT
    netns_create
  fi
  start_etcd
  for node in "${nodes[@]}"; do
    write_patroni_config "$node" "$mode"
  done
  # The first node bootstraps the cluster; the others clone it once it leads.
  start_node node1
  for _ in $(seq 1 120); do
    [ "$(leader || true)" = node1 ] && break
    sleep 0.5
  done
  [ "$(leader || true)" = node1 ] || { say "node1 did not become the leader (see $dir/node1-log)"; exit 1; }
  start_node node2
  start_node node3
  for name in $(haproxies); do
    write_haproxy_config "$name"
    start_haproxy "$name"
  done
  wait_healthy 120 all
  sql "SELECT 1 FROM pg_database WHERE datname = '$database'" | grep -q 1 \
    || sql "CREATE DATABASE $database"
  say "up ($mode): leader $(leader); HAProxy on $write_host:$write_port"
  if $netns; then
    trap - EXIT
    netns_print_lines
  fi
  echo "postgres://postgres@$write_host:$write_port/$database"
}

down() {
  for pidfile in "$dir"/hap*.pid "$dir"/node*.pid "$dir"/etcd.pid; do
    [ -f "$pidfile" ] && kill -TERM "$(cat "$pidfile")" 2>/dev/null || true
  done
  for _ in $(seq 1 40); do
    local running=0
    for pidfile in "$dir"/*.pid; do alive "$pidfile" && running=1; done
    [ $running = 0 ] && break
    sleep 0.25
  done
  for node in "${nodes[@]}"; do
    local pm
    pm=$(postmaster_pid "$node" 2>/dev/null || true)
    [ -n "$pm" ] && kill -KILL "$pm" 2>/dev/null || true
  done
  for pidfile in "$dir"/*.pid; do
    [ -f "$pidfile" ] && kill -KILL "$(cat "$pidfile")" 2>/dev/null || true
  done
  pkill -KILL -f -- "$dir/" 2>/dev/null || true
  if $netns; then netns_teardown; fi
  rm -rf "$dir"
  say "down"
}

# A node dies as a machine would: its Patroni and its PostgreSQL, at once, with SIGKILL.
kill_node() {
  local node=$1 pm
  pm=$(postmaster_pid "$node" || true)
  [ -f "$dir/$node.pid" ] && kill -KILL "$(cat "$dir/$node.pid")" 2>/dev/null || true
  pkill -KILL -f -- "$patroni $dir/$node.yml" 2>/dev/null || true
  if [ -n "$pm" ]; then
    pkill -KILL -P "$pm" 2>/dev/null || true
    kill -KILL "$pm" 2>/dev/null || true
  fi
}

# Signals every process of a node: its Patroni and its PostgreSQL's postmaster and children.
signal_node() {
  local signal=$1 node=$2 pm pids
  pm=$(postmaster_pid "$node" || true)
  pids=$(pgrep -f -- "$patroni $dir/$node.yml" || true)
  [ -n "$pm" ] && pids="$pids $pm $(pgrep -P "$pm" | tr '\n' ' ')"
  # shellcheck disable=SC2086
  [ -n "${pids// /}" ] && kill "-$signal" $pids 2>/dev/null || true
}

# The leader's WAL sender processes: stopped, they ship nothing more to the standbys (a stopped
# WAL receiver would not do: the leader's WAL would wait in its socket's buffer and arrive anyway).
walsenders() {
  local node pm
  node=$(leader) || return 0
  pm=$(postmaster_pid "$node" || true)
  [ -n "$pm" ] && pgrep -P "$pm" -f "walsender" || true
}

command=${1:-}
shift || true
case $command in
  install) install_missing ;;
  up) up "$@" ;;
  down)
    [ "${1:-}" = --netns ] && ! $netns && netns_activate
    down
    ;;
  exec) netns_exec "$@" ;;
  nemesis) nemesis "$@" ;;
  heal) heal "${1:-}" ;;
  status) status ;;
  leader) leader ;;
  history) "$patronictl" -c "$dir/node1.yml" history -f json ;;
  wait-healthy) wait_healthy "${1:-60}" "${2:-}" ;;
  reinit-stuck) reinit_stuck ;;
  kill-leader)
    node=$(leader) || { say "no leader to kill"; exit 1; }
    kill_node "$node"
    echo "$node"
    ;;
  start-node)
    node=${1:?start-node needs a node name}
    alive "$dir/$node.pid" || start_node "$node"
    ;;
  switchover)
    from=$(leader) || { say "no leader to switch over from"; exit 1; }
    "$patronictl" -c "$dir/node1.yml" switchover payments --leader "$from" --force >/dev/null
    echo "$from"
    ;;
  kill-standbys)
    for node in $(standbys); do
      kill_node "$node"
      echo "$node"
    done
    ;;
  pause-leader)
    seconds=${1:?pause-leader needs a number of seconds}
    node=$(leader) || { say "no leader to pause"; exit 1; }
    signal_node STOP "$node"
    sleep "$seconds"
    signal_node CONT "$node"
    echo "$node"
    ;;
  freeze-replication)
    pids=$(walsenders)
    [ -n "$pids" ] || { say "the leader has no WAL sender to freeze"; exit 1; }
    # shellcheck disable=SC2086
    kill -STOP $pids
    ;;
  thaw-replication)
    for node in "${nodes[@]}"; do
      pm=$(postmaster_pid "$node" || true)
      [ -n "$pm" ] && { pgrep -P "$pm" -f walsender | xargs -r kill -CONT; } || true
    done
    ;;
  restart-etcd)
    kill -TERM "$(cat "$dir/etcd.pid")" 2>/dev/null || true
    for _ in $(seq 1 40); do alive "$dir/etcd.pid" || break; sleep 0.1; done
    start_etcd
    ;;
  *)
    sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
    exit 2
    ;;
esac
