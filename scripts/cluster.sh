#!/usr/bin/env bash
# A cluster on one machine, for tests: each node a network namespace, joined
# through a bridge by veth pairs shaped with `tc tbf`, so that traffic
# between nodes is slower than loopback, as between real machines. Needs
# root (or CAP_NET_ADMIN) and iproute2.
#
#   scripts/cluster.sh check                  exit 0 if namespaces can be made
#   scripts/cluster.sh up N [--rate R]       nodes weft-node0..N-1 at 10.77.0.1..N
#   scripts/cluster.sh run I CMD [ARGS...]    run CMD on node I
#   scripts/cluster.sh addr I                 node I's address
#   scripts/cluster.sh down                   remove the nodes and the bridge
#
# WEFT_CLUSTER_PREFIX (default weft) names the namespaces, bridge and links,
# so that clusters of different users or tests do not collide.
# Inside a node the interface is `eth0` (give gloo GLOO_SOCKET_IFNAME=eth0).
# The default rate, 400mbit, measured about 48 MB/s between nodes.
set -euo pipefail

prefix="${WEFT_CLUSTER_PREFIX:-weft}"
rate=400mbit
die() { echo "cluster.sh: $*" >&2; exit 1; }

parse_opts() {
  while [ $# -gt 0 ]; do
    case "$1" in
      --rate) rate="$2"; shift 2 ;;
      *) die "unknown option $1" ;;
    esac
  done
}

addr() { echo "10.77.0.$(( $1 + 1 ))"; }

down() {
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^${prefix}-node" || true); do
    ip netns del "$ns" 2>/dev/null || true
  done
  ip link del "${prefix}-br0" 2>/dev/null || true
  for link in $(ip -o link show 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 | grep "^${prefix}-v" || true); do
    ip link del "$link" 2>/dev/null || true
  done
}

cmd="${1:-}"
[ -n "$cmd" ] || die "usage: cluster.sh check|up N|run I CMD...|addr I|down"
shift
case "$cmd" in
  check)
    # Everything `up` needs, on throwaway names: a namespace, a bridge, a
    # veth pair into the namespace, and a tbf qdisc.
    command -v ip > /dev/null && command -v tc > /dev/null ||
      die "iproute2 (ip, tc) is not installed"
    probe="wprobe$$"
    cleanup() {
      ip netns del "$probe" 2> /dev/null || true
      ip link del "${probe}b" 2> /dev/null || true
      ip link del "${probe}v" 2> /dev/null || true
    }
    ip netns add "$probe" 2> /dev/null ||
      die "cannot create network namespaces here (needs root or CAP_NET_ADMIN)"
    if ! { ip link add "${probe}b" type bridge &&
           ip link add "${probe}v" type veth peer name eth0 netns "$probe" &&
           ip link set "${probe}v" master "${probe}b" &&
           ip netns exec "$probe" tc qdisc add dev eth0 root tbf rate 1mbit burst 32kb latency 50ms; } 2> /dev/null; then
      cleanup
      die "namespaces work but bridges, veth pairs or tc tbf do not (kernel modules bridge, veth, sch_tbf)"
    fi
    cleanup
    ;;
  up)
    n="${1:-}"; shift || true
    [[ "$n" =~ ^[1-9][0-9]?$ ]] || die "up needs a node count 1..99"
    parse_opts "$@"
    down
    ip link add "${prefix}-br0" type bridge
    ip link set "${prefix}-br0" up
    for ((i = 0; i < n; i++)); do
      ns="${prefix}-node$i"
      ip netns add "$ns"
      ip link add "${prefix}-v$i" type veth peer name eth0 netns "$ns"
      ip link set "${prefix}-v$i" master "${prefix}-br0" up
      ip -n "$ns" addr add "$(addr "$i")/24" dev eth0
      ip -n "$ns" link set eth0 up
      ip -n "$ns" link set lo up
      # Shape both directions: out of the node and into it.
      ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$rate" burst 64kb latency 50ms
      tc qdisc add dev "${prefix}-v$i" root tbf rate "$rate" burst 64kb latency 50ms
    done
    ;;
  run)
    i="${1:-}"; shift || true
    [[ "$i" =~ ^[0-9]+$ ]] || die "run needs a node index"
    [ $# -gt 0 ] || die "run needs a command"
    exec ip netns exec "${prefix}-node$i" "$@"
    ;;
  addr)
    [[ "${1:-}" =~ ^[0-9]+$ ]] || die "addr needs a node index"
    addr "$1"
    ;;
  down)
    parse_opts "$@"
    down
    ;;
  *) die "unknown command $cmd" ;;
esac
