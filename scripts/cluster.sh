#!/usr/bin/env bash
# A cluster on one machine: N "hosts" (Linux network namespaces) on one switch (a bridge in its own
# namespace), every link shaped with tc tbf in both directions, and Open MPI started across them
# through a launch agent that runs each daemon inside its host's namespace (and UTS namespace, so
# the host has its own hostname). Only addresses inside the namespaces created here are used
# (10.231.0.0/24); the machine's own network is never touched.
#
#   scripts/cluster.sh up N [--rate 1gbit] [--ranks-per-host K]   create (idempotent; a failed up leaves nothing)
#   scripts/cluster.sh run [-np P] [--map ppr|host] -- CMD ARGS...  mpirun across the hosts, K ranks per host
#   scripts/cluster.sh shape HOST RATE                             re-shape one host's link (both directions)
#   scripts/cluster.sh link HOST down|up                           take one host's link down / up
#   scripts/cluster.sh kill HOST                                   SIGKILL every process inside one host
#   scripts/cluster.sh status                                      what is up
#   scripts/cluster.sh drops                                       packets dropped so far by every link's tbf (a sum)
#   scripts/cluster.sh down                                        remove everything (idempotent)
#   scripts/cluster.sh check                                       exit 0 if a cluster can be built here, 77 if not
#
# Needs root, iproute2 (ip, tc), util-linux (unshare) and Open MPI. Where namespaces cannot be created
# (no CAP_SYS_ADMIN, e.g. an unprivileged container) `up` and `check` exit 77 with the reason, and the
# tests that need a cluster skip.
set -euo pipefail
prefix=${ZEN_CLUSTER_PREFIX:-zenc}
subnet=${ZEN_CLUSTER_SUBNET:-10.231.0}
state=${ZEN_CLUSTER_STATE:-/run/zen-cluster}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

die() { echo "cluster.sh: $*" >&2; exit 1; }
skip() { echo "cluster.sh: $*" >&2; exit 77; }

# Can this machine host namespaces? Probe with a throwaway namespace.
probe() {
  [[ $(id -u) == 0 ]] || skip "needs root (network namespaces, tc)"
  command -v ip >/dev/null || skip "iproute2 (ip) not found"
  command -v tc >/dev/null || skip "tc (iproute2) not found"
  command -v unshare >/dev/null || skip "unshare (util-linux) not found"
  local ns="${prefix}-probe-$$" err
  if ! err=$(ip netns add "$ns" 2>&1); then skip "cannot create network namespaces here: $err"; fi
  if ! err=$(ip netns exec "$ns" unshare --uts true 2>&1); then ip netns del "$ns" 2>/dev/null || true; skip "cannot enter a namespace: $err"; fi
  ip netns del "$ns"
}

# Burst for tbf: at least 64 KiB (GSO segments are split by tbf above that), at least 1 ms at the rate.
burst_for() {
  local bits
  bits=$(rate_bits "$1")
  local b=$(( bits / 8 / 1000 ))
  (( b < 65536 )) && b=65536
  echo "$b"
}
rate_bits() {
  local r=${1,,} m=1
  case $r in
    *gbit) m=1000000000; r=${r%gbit} ;;
    *mbit) m=1000000; r=${r%mbit} ;;
    *kbit) m=1000; r=${r%kbit} ;;
    *bit) r=${r%bit} ;;
    *) die "rate '$1': use e.g. 1gbit, 10gbit, 100mbit" ;;
  esac
  [[ $r =~ ^[0-9]+$ ]] || die "rate '$1': the number must be an integer (e.g. 2500mbit)"
  echo $(( r * m ))
}

shape_dev() {  # NS DEV RATE
  local b
  b=$(burst_for "$3")
  ip netns exec "$1" tc qdisc replace dev "$2" root tbf rate "$3" burst "$b" latency "${ZEN_CLUSTER_QUEUE:-5ms}"
}

hosts_n() { cat "$state/hosts" 2>/dev/null || echo 0; }

cmd_down() {
  local ns
  # Processes left inside the namespaces (daemons of a killed job) go first.
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^${prefix}-" || true); do
    local pids
    pids=$(ip netns pids "$ns" 2>/dev/null || true)
    [[ -n $pids ]] && kill -9 $pids 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
  done
  rm -rf "$state"
}

cmd_up() {
  local n=${1:-}
  shift || true
  [[ $n =~ ^[0-9]+$ ]] && (( n >= 1 && n <= 64 )) || die "up: the host count must be 1..64 (got '${n}')"
  local rate=1gbit k=1
  while (( $# )); do
    case $1 in
      --rate) rate=${2:?--rate needs a value}; shift 2 ;;
      --ranks-per-host) k=${2:?--ranks-per-host needs a value}; shift 2 ;;
      *) die "up: unknown option '$1'" ;;
    esac
  done
  [[ $k =~ ^[0-9]+$ ]] && (( k >= 1 )) || die "up: --ranks-per-host must be >= 1"
  rate_bits "$rate" >/dev/null
  if [[ -f $state/config ]] && [[ $(cat "$state/config") == "$n $rate $k" ]] && ip netns list | grep -q "^${prefix}-sw"; then
    echo "cluster.sh: already up ($n hosts, $rate, $k ranks per host)"
    return 0
  fi
  probe
  cmd_down
  # Any failure from here on (set -e) ends the script: the EXIT trap removes what was built.
  trap 'echo "cluster.sh: up failed; removing what was built" >&2; cmd_down' EXIT
  mkdir -p "$state"
  ip netns add "${prefix}-sw"
  ip netns exec "${prefix}-sw" ip link set lo up
  ip netns exec "${prefix}-sw" ip link add br0 type bridge
  ip netns exec "${prefix}-sw" ip link set br0 up
  # The head: where mpirun runs (unshaped port, no ranks).
  local i name
  for i in head $(seq 0 $((n - 1))); do
    if [[ $i == head ]]; then name=${prefix}-head; else name=${prefix}-h$i; fi
    ip netns add "$name"
    ip netns exec "$name" ip link set lo up
    local port=p$i
    ip link add eth0 netns "$name" type veth peer name "$port" netns "${prefix}-sw"
    ip netns exec "${prefix}-sw" ip link set "$port" master br0
    ip netns exec "${prefix}-sw" ip link set "$port" up
    if [[ $i == head ]]; then
      ip netns exec "$name" ip addr add "$subnet.254/24" dev eth0
    else
      ip netns exec "$name" ip addr add "$subnet.$((i + 1))/24" dev eth0
      shape_dev "$name" eth0 "$rate"            # host -> switch
      shape_dev "${prefix}-sw" "$port" "$rate"  # switch -> host
    fi
    ip netns exec "$name" ip link set eth0 up
  done
  # Hostfile (addresses) and the launch agent.
  : >"$state/hostfile"
  for i in $(seq 0 $((n - 1))); do echo "$subnet.$((i + 1)) slots=$k" >>"$state/hostfile"; done
  cat >"$state/agent" <<EOF
#!/bin/sh
# Open MPI launch agent (plm_rsh_agent): [options] HOST COMMAND... -> run COMMAND inside HOST's network
# namespace and a new UTS namespace named after the host. HOST: h<i> or its address $subnet.<i+1>.
while [ \$# -gt 0 ]; do case "\$1" in -*) shift ;; *) break ;; esac; done
host=\$1; shift
case "\$host" in
  $subnet.*) host=h\$(( \${host##*.} - 1 )) ;;
  h[0-9]*) ;;
  *) echo "zen cluster agent: unknown host '\$host'" >&2; exit 255 ;;
esac
exec ip netns exec "${prefix}-\$host" unshare --uts /bin/sh -c "hostname \$host && \$*"
EOF
  chmod +x "$state/agent"
  echo "$n" >"$state/hosts"
  echo "$k" >"$state/ranks_per_host"
  echo "$rate" >"$state/rate"
  echo "$n $rate $k" >"$state/config"
  # Every host's link must be up (operstate UP on both ends; traffic is proven by the first job).
  for i in $(seq 0 $((n - 1))); do
    [[ $(ip netns exec "${prefix}-h$i" cat /sys/class/net/eth0/operstate) == up ]] ||
      { echo "cluster.sh: the link of host h$i did not come up" >&2; exit 1; }
  done
  trap - EXIT
  echo "cluster.sh: up: $n hosts ($subnet.1..$subnet.$n), links $rate each way, $k ranks per host"
}

cmd_run() {
  [[ -f $state/config ]] || die "run: no cluster is up (scripts/cluster.sh up N)"
  local n k np="" map=ppr
  n=$(hosts_n)
  k=$(cat "$state/ranks_per_host")
  while (( $# )); do
    case $1 in
      -np|-n) np=$2; shift 2 ;;
      --map) map=$2; shift 2 ;;
      --) shift; break ;;
      *) die "run: unknown option '$1' (use: run [-np P] [--map ppr|host] -- CMD ARGS...)" ;;
    esac
  done
  (( $# )) || die "run: no command (use: run [-np P] -- CMD ARGS...)"
  np=${np:-$((n * k))}
  (( np <= n * k )) || die "run: -np $np exceeds $n hosts x $k slots"
  local mapping=(--map-by "ppr:$k:node")
  [[ $map == host ]] && mapping=(--map-by node)
  # The hostfile lists addresses (the head has no name service for h<i>); the agent maps them back.
  local hf="$state/hostfile"
  # Every host shares this machine's cores, and a packet between namespaces is processed by the
  # kernel in softirq context (ksoftirqd when the cores are busy). A rank spinning in MPI's progress
  # loop keeps ksoftirqd off its core until the next scheduler tick: every message then waits ~4 ms
  # (8 ms per round trip, measured). So ranks yield the core while they wait (Open MPI's
  # mpi_yield_when_idle, zen's ZEN_MPI_YIELD), as they would not need to on real hosts, where the
  # NIC's interrupts run the network stack. Override by setting either variable.
  export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1} ZEN_MPI_YIELD=${ZEN_MPI_YIELD:-1}
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
  exec ip netns exec "${prefix}-head" mpirun --hostfile "$hf" -np "$np" "${mapping[@]}" \
    --mca plm_rsh_agent "$state/agent" --mca plm_rsh_no_tree_spawn 1 \
    --mca oob_tcp_if_include "$subnet.0/24" --mca btl_tcp_if_include "$subnet.0/24" \
    --mca btl self,vader,tcp --mca orte_keep_fqdn_hostnames 1 \
    "$@"
}

host_ns() {
  local h=$1 n
  n=$(hosts_n)
  [[ $h =~ ^h([0-9]+)$ ]] && (( BASH_REMATCH[1] < n )) || die "no host '$h' (hosts are h0..h$((n - 1)))"
  echo "${prefix}-$h"
}

cmd_shape() {
  local ns port
  ns=$(host_ns "${1:?shape HOST RATE}")
  rate_bits "${2:?shape HOST RATE}" >/dev/null
  port=p${1#h}
  shape_dev "$ns" eth0 "$2"
  shape_dev "${prefix}-sw" "$port" "$2"
  echo "cluster.sh: $1 shaped to $2 each way"
}

cmd_link() {
  local ns
  ns=$(host_ns "${1:?link HOST down|up}")
  case ${2:-} in
    down|up) ip netns exec "$ns" ip link set eth0 "$2" ;;
    *) die "link: use 'link HOST down' or 'link HOST up'" ;;
  esac
}

cmd_kill() {
  local ns pids
  ns=$(host_ns "${1:?kill HOST}")
  pids=$(ip netns pids "$ns" || true)
  [[ -n $pids ]] && kill -9 $pids 2>/dev/null || true
  echo "cluster.sh: killed $(echo $pids | wc -w) processes on $1"
}

cmd_status() {
  if [[ -f $state/config ]]; then
    read -r n rate k <"$state/config"
    echo "up: $n hosts, $rate, $k ranks per host"
    local i
    for i in $(seq 0 $((n - 1))); do
      printf 'h%d %s.%d %s\n' "$i" "$subnet" $((i + 1)) \
        "$(ip netns exec "${prefix}-h$i" tc qdisc show dev eth0 | head -n1)"
    done
  else
    echo "down"
  fi
}

# Packets the tbf qdiscs of every link (hosts' eth0, the switch's ports) have dropped since `up`: a
# port queue that overflowed (incast); TCP then retransmits, after a timeout when the loss is at the end.
cmd_drops() {
  [[ -f $state/config ]] || die "drops: no cluster is up"
  local n i sum=0 d
  n=$(hosts_n)
  for i in $(seq 0 $((n - 1))); do
    for d in "$(ip netns exec "${prefix}-h$i" tc -s qdisc show dev eth0)" "$(ip netns exec "${prefix}-sw" tc -s qdisc show dev "p$i")"; do
      sum=$(( sum + $(awk 'match($0, /dropped [0-9]+/) { print substr($0, RSTART + 8, RLENGTH - 8); exit }' <<<"$d") ))
    done
  done
  echo "$sum"
}

case ${1:-} in
  up) shift; cmd_up "$@" ;;
  down) cmd_down; echo "cluster.sh: down" ;;
  run) shift; cmd_run "$@" ;;
  shape) shift; cmd_shape "$@" ;;
  link) shift; cmd_link "$@" ;;
  kill) shift; cmd_kill "$@" ;;
  status) cmd_status ;;
  drops) cmd_drops ;;
  check) probe; echo "cluster.sh: network namespaces available" ;;
  *) sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
