# shellcheck shell=bash disable=SC2034,SC2154
# The network-namespace mode of scripts/ha-cluster.sh (`up --netns`), sourced by it: the
# namespaces, their veth pairs and bridge, and the nemeses that cut, lossify or slow one link.
# Uses ha-cluster.sh's variables and functions (dir, nodes, say, start_daemon, alive, leader,
# node_addr, rest_port, write_port); its header documents names, addresses and commands.
#
# Each nemesis is an iptables chain named ha-NEMESIS in the namespaces it touches, jumped to
# from INPUT and OUTPUT, so it acts on the namespace's own packets in both directions; `heal
# NEMESIS` removes that chain everywhere, `heal` every chain and every delayer.

netns=false
netns_prefix=${HA_NETNS_PREFIX:-payha}
netns_subnet=${HA_NETNS_SUBNET:-10.231.0.0/24}
netns_backends=2

# Switches the script's addresses and ports to the namespaces'.
netns_activate() {
  if ! [[ $netns_subnet =~ ^([0-9]+\.[0-9]+\.[0-9]+)\.0/24$ ]]; then
    say "HA_NETNS_SUBNET must be a /24 ending in .0/24, not $netns_subnet"
    exit 2
  fi
  netns_net=${BASH_REMATCH[1]}
  netns=true
  etcd_host=$(netns_addr etcd)
  etcd_port=2379
  etcd_peer_port=2380
  write_host=$(netns_addr hap1)
  write_port=5432
  stats_port=8404
  hba_net=$netns_subnet
}

# The mode is remembered in the scratch folder, so every later command finds the namespaces.
netns_save() {
  printf 'netns_prefix=%s\nnetns_subnet=%s\nnetns_backends=%s\n' \
    "$netns_prefix" "$netns_subnet" "$netns_backends" >"$dir/netns.env"
}
netns_load() {
  # shellcheck source=/dev/null
  . "$dir/netns.env"
  netns_activate
}

# A component's host number in the subnet: the root namespace .1, etcd .10, nodeN .10+N,
# hapI .20+I, backendI .40+I, bank .60.
netns_host() {
  case $1 in
    root) echo 1 ;;
    etcd) echo 10 ;;
    node[1-9]) echo $((10 + ${1#node})) ;;
    hap[1-9] | hap1[0-9]) echo $((20 + ${1#hap})) ;;
    backend[1-9] | backend1[0-9]) echo $((40 + ${1#backend})) ;;
    bank) echo 60 ;;
    *) say "no component $1"; return 1 ;;
  esac
}
netns_addr() { echo "$netns_net.$(netns_host "$1")"; }
ns_name() { echo "$netns_prefix-$1"; }
netns_bridge() { echo "${netns_prefix}br"; }
netns_roles() {
  printf '%s\n' etcd "${nodes[@]}"
  seq -f 'hap%g' 1 "$netns_backends"
  seq -f 'backend%g' 1 "$netns_backends"
  echo bank
}
# The command prefix that runs a command in ROLE's namespace; nothing in loopback mode.
ns_exec() { if $netns; then echo "ip netns exec $(ns_name "$1")"; fi; }

# Before anything is created: names, subnet and iptables are usable, nothing of ours is left.
netns_preflight() {
  if [ ${#netns_prefix} -gt 10 ] || ! [[ $netns_prefix =~ ^[a-z][a-z0-9]*$ ]]; then
    say "HA_NETNS_PREFIX must be 1 to 10 lower-case letters or digits (interface names are short)"
    exit 2
  fi
  if ! [[ $netns_backends =~ ^[0-9]+$ ]] || [ "$netns_backends" -lt 1 ] || [ "$netns_backends" -gt 19 ]; then
    say "--backends takes 1 to 19"
    exit 2
  fi
  if ip link show "$(netns_bridge)" >/dev/null 2>&1 || ip netns list | grep "^$netns_prefix-" >/dev/null; then
    say "namespaces or bridge $netns_prefix-* exist already: 'down --netns' with HA_NETNS_PREFIX=$netns_prefix, or another prefix"
    exit 1
  fi
  if ip route show to match "$netns_net.1" | grep -v '^default' >/dev/null; then
    say "$netns_subnet is routed already on this machine: choose another HA_NETNS_SUBNET"
    exit 1
  fi
}

netns_create() {
  local bridge role ns veth
  bridge=$(netns_bridge)
  ip link add "$bridge" type bridge
  ip link set "$bridge" up
  ip addr add "$(netns_addr root)/24" dev "$bridge"
  for role in $(netns_roles); do
    ns=$(ns_name "$role")
    veth=${netns_prefix}v$(netns_host "$role")
    ip netns add "$ns"
    ip link add "$veth" type veth peer name eth0 netns "$ns"
    ip link set "$veth" master "$bridge" up
    ip -n "$ns" addr add "$(netns_addr "$role")/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
  done
  if ! ip netns exec "$(ns_name etcd)" iptables -w -S >/dev/null 2>&1; then
    say "iptables does not work inside a network namespace here: the nemeses need it"
    return 1
  fi
}

# Every process in each of our namespaces killed (the cluster's and whatever the caller started
# there), then the namespaces, their veths and the bridge removed. Safe to run twice.
netns_teardown() {
  local ns pids link
  for ns in $(ip netns list | awk '{ print $1 }' | grep -E "^$netns_prefix-(etcd|node[0-9]+|hap[0-9]+|backend[0-9]+|bank)$"); do
    pids=$(ip netns pids "$ns" 2>/dev/null | tr '\n' ' ')
    # shellcheck disable=SC2086
    if [ -n "${pids// /}" ]; then kill -KILL $pids 2>/dev/null || true; fi
    for _ in $(seq 1 20); do
      [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && break
      sleep 0.1
    done
    ip netns del "$ns" 2>/dev/null || true
  done
  for link in $(ip -o link show 2>/dev/null | awk -F': ' '{ print $2 }' | sed 's/@.*//' \
    | grep -E "^${netns_prefix}(v[0-9]+|br)$"); do
    ip link del "$link" 2>/dev/null || true
  done
}

# The lines `up --netns` ends with, before the DATABASE_URL of hap1.
netns_print_lines() {
  local i
  for i in $(seq 1 "$netns_backends"); do
    echo "BACKEND_NS=$(ns_name "backend$i") DATABASE_URL=postgres://postgres@$(netns_addr "hap$i"):$write_port/$database BIND=$(netns_addr "backend$i")"
  done
  echo "BANK_NS=$(ns_name bank) BIND=$(netns_addr bank)"
}

netns_exec() {
  local role=${1:-}
  shift || true
  [ "${1:-}" = -- ] && shift
  $netns || { say "exec needs a cluster started with up --netns"; exit 2; }
  if [ -z "$role" ] || [ $# = 0 ]; then say "usage: exec ROLE -- CMD..."; exit 2; fi
  if ! netns_roles | grep -x -- "$role" >/dev/null; then say "no namespace for $role"; exit 2; fi
  exec ip netns exec "$(ns_name "$role")" "$@"
}

# iptables in ROLE's namespace.
ipt() {
  local role=$1
  shift
  ip netns exec "$(ns_name "$role")" iptables -w "$@"
}

# Chain CHAIN in ROLE's namespace, empty, jumped to from INPUT and OUTPUT.
chain_open() {
  local role=$1 chain=$2 hook
  ipt "$role" -N "$chain" 2>/dev/null || ipt "$role" -F "$chain"
  for hook in INPUT OUTPUT; do
    ipt "$role" -C "$hook" -j "$chain" 2>/dev/null || ipt "$role" -I "$hook" -j "$chain"
  done
}

chain_remove() {
  local role=$1 chain=$2 hook
  for hook in INPUT OUTPUT; do
    while ipt "$role" -D "$hook" -j "$chain" 2>/dev/null; do :; done
  done
  ipt "$role" -F "$chain" 2>/dev/null || true
  ipt "$role" -X "$chain" 2>/dev/null || true
}

# Every packet between ROLE and each of the ROLES after CHAIN dropped, both ways.
cut_from() {
  local role=$1 chain=$2 other addr
  shift 2
  chain_open "$role" "$chain"
  for other in "$@"; do
    addr=$(netns_addr "$other")
    ipt "$role" -A "$chain" -s "$addr" -j DROP
    ipt "$role" -A "$chain" -d "$addr" -j DROP
  done
}

others() {
  local skip=$1 role
  shift
  for role in "$@"; do [ "$role" != "$skip" ] && echo "$role"; done
  return 0
}

# The delayers of slow-db-link: asked to stop once no rule sends them packets and the longest
# delay is over, so no held packet is dropped.
stop_delayers() {
  local pidfile
  compgen -G "$dir/delay-*.pid" >/dev/null || return 0
  sleep "$(awk -v ms="$(cat "$dir/slow-db-link" 2>/dev/null || echo 0)" 'BEGIN { print ms / 1000 + 0.1 }')"
  for pidfile in "$dir"/delay-*.pid; do
    kill -TERM "$(cat "$pidfile")" 2>/dev/null || true
    rm -f "$pidfile"
  done
  rm -f "$dir/slow-db-link"
}

nfqueue_delay_binary() {
  local repo bin
  repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  bin=${HA_NFQUEUE_DELAY:-${CARGO_TARGET_DIR:-$repo/target}/debug/nfqueue-delay}
  if [ ! -x "$bin" ]; then
    say "building nfqueue-delay (the test harness's packet delayer)"
    (cd "$repo" && cargo build -q -p test-harness --bin nfqueue-delay) >&2
  fi
  echo "$bin"
}

# The backends' database link: the packets between backendI's namespace and HAProxy I's
# PostgreSQL port, both ways; a rule in backendI's namespace sends them to TARGET.
db_link_rules() {
  local chain=$1 i hap
  shift
  for i in $(seq 1 "$netns_backends"); do
    hap=$(netns_addr "hap$i")
    chain_open "backend$i" "$chain"
    ipt "backend$i" -A "$chain" -p tcp -d "$hap" --dport "$write_port" "$@"
    ipt "backend$i" -A "$chain" -p tcp -s "$hap" --sport "$write_port" "$@"
  done
}

nemesis() {
  $netns || { say "nemeses need a cluster started with up --netns"; exit 2; }
  local name=${1:-} node lead i bin
  shift || true
  case $name in
    isolate-leader)
      # Cut from etcd and from the standbys; the HAProxys (and the root namespace) still reach it.
      lead=$(leader) || { say "no leader to isolate"; exit 1; }
      chain_remove "$lead" ha-isolate-leader
      # shellcheck disable=SC2046
      cut_from "$lead" ha-isolate-leader etcd $(others "$lead" "${nodes[@]}")
      echo "$lead"
      ;;
    isolate-backend)
      i=${1:?isolate-backend needs a backend number}
      if ! [[ $i =~ ^[0-9]+$ ]] || [ "$i" -lt 1 ] || [ "$i" -gt "$netns_backends" ]; then say "no backend $i"; exit 2; fi
      lead=${2:-$(leader)} || { say "no leader to keep backend $i on"; exit 1; }
      # HAProxy I reaches the leader of now only; backend I reaches HAProxy I (and is reached
      # from the root namespace, the edge's), nothing else of the cluster.
      # shellcheck disable=SC2046
      cut_from "hap$i" ha-isolate-backend $(others "$lead" "${nodes[@]}")
      # shellcheck disable=SC2046
      cut_from "backend$i" ha-isolate-backend etcd "${nodes[@]}" \
        $(others "hap$i" $(seq -f 'hap%g' 1 "$netns_backends")) \
        $(others "backend$i" $(seq -f 'backend%g' 1 "$netns_backends"))
      echo "$lead"
      ;;
    cut-sync-standby)
      lead=$(leader) || { say "no leader"; exit 1; }
      for node in "${nodes[@]}"; do
        [ "$node" != "$lead" ] || continue
        if curl -sf -m 1 -o /dev/null "http://$(node_addr "$node"):$(rest_port "$node")/synchronous"; then
          cut_from "$node" ha-cut-sync-standby "$lead"
          echo "$node"
          return
        fi
      done
      say "no synchronous standby to cut"
      exit 1
      ;;
    lossy-db-link)
      local percent=${1:-30}
      db_link_rules ha-lossy-db-link -m statistic --mode random \
        --probability "$(awk -v p="$percent" 'BEGIN { printf "%.4f", p / 100 }')" -j DROP
      ;;
    slow-db-link)
      local ms=${1:-200} jitter=${2:-100}
      for i in $(seq 1 "$netns_backends"); do chain_remove "backend$i" ha-slow-db-link; done
      stop_delayers
      bin=$(nfqueue_delay_binary)
      echo $((ms + jitter)) >"$dir/slow-db-link"
      for i in $(seq 1 "$netns_backends"); do
        : >"$dir/delay-backend$i.log"
        start_daemon "$dir/delay-backend$i.log" "$dir/delay-backend$i.pid" \
          ip netns exec "$(ns_name "backend$i")" "$bin" 0 "$ms" "$jitter"
        for _ in $(seq 1 50); do
          grep -q bound "$dir/delay-backend$i.log" && break
          alive "$dir/delay-backend$i.pid" || break
          sleep 0.1
        done
        grep -q bound "$dir/delay-backend$i.log" \
          || { say "the delayer did not start: $(cat "$dir/delay-backend$i.log")"; exit 1; }
      done
      # --queue-bypass: were a delayer to die, packets would pass undelayed, not be lost.
      db_link_rules ha-slow-db-link -j NFQUEUE --queue-num 0 --queue-bypass
      ;;
    cut-bank-link)
      # shellcheck disable=SC2046
      cut_from bank ha-cut-bank-link $(seq -f 'backend%g' 1 "$netns_backends")
      ;;
    *)
      say "nemeses: isolate-leader, isolate-backend I [NODE], cut-sync-standby, lossy-db-link [PERCENT], slow-db-link [MS] [JITTER_MS], cut-bank-link"
      exit 2
      ;;
  esac
}

heal() {
  $netns || { say "heal needs a cluster started with up --netns"; exit 2; }
  local only=${1:-} role chain
  for role in $(netns_roles); do
    for chain in $(ipt "$role" -S 2>/dev/null | sed -n 's/^-N \(ha-[a-z-]*\)$/\1/p'); do
      [ -z "$only" ] || [ "$chain" = "ha-$only" ] || continue
      chain_remove "$role" "$chain"
    done
  done
  if [ -z "$only" ] || [ "$only" = slow-db-link ]; then
    stop_delayers
  fi
}
