#!/usr/bin/env bash
# Flat against hierarchical all-reduce on 2 emulated nodes x 2 ranks joined
# by a shaped link (scripts/cluster.sh; needs root):
#   bench/allreduce.sh BUILD_DIR [MiB] [rate] [iterations]
# Then, on the same nodes, the groups of ranks with the same local rank
# (one per node) cross the link at once with a reduce-scatter, an
# all-gather and an all-reduce that each send MiB per rank.
set -euo pipefail
build="${1:?usage: bench/allreduce.sh BUILD_DIR [MiB] [rate] [iterations]}"
mib="${2:-16}"
rate="${3:-400mbit}"
iters="${4:-5}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cluster="$here/scripts/cluster.sh"
export WEFT_CLUSTER_PREFIX=weftbench
"$cluster" up 2 --rate "$rate"
trap '"$cluster" down' EXIT
run() {
  "$cluster" run "$1" "$build/bin/weftrun" --nnodes 2 --node-rank "$1" \
    --nproc-per-node 2 --master-addr 10.77.0.1 --master-port 29621 \
    "$build/bench/allreduce_bench" --host "$("$cluster" addr "$1")" --mib "$mib" --iters "$iters"
}
run 1 > /dev/null &
run 0
wait
