#!/usr/bin/env bash
# Runs CMD as one emulated device of fixed speed: in a CPU cgroup of its
# own (named by $WEFT_CPU_SHARE_ID, else $RANK, which weftrun sets),
# limited to SHARE cores. When
# more ranks than cores share this host, an uncapped rank runs faster while
# another idles (a pipeline's bubble lends its core), which no cluster of
# separate devices does; capped, each rank has its share and no more.
# Needs root and a cgroup cpu controller (v1 cpu.cfs_quota_us or v2
# cpu.max).
#
#   bench/cpu_share.sh 0.5 ./train --steps 10
#   bench/cpu_share.sh --clean            remove the cgroups made here
set -euo pipefail
tag="${WEFT_CPU_SHARE_TAG:-weft-share}"
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  root=/sys/fs/cgroup v2=1
elif [ -d /sys/fs/cgroup/cpu ]; then
  root=/sys/fs/cgroup/cpu v2=0
else
  # `ip netns exec` (scripts/cluster.sh run) mounts a sysfs of its own,
  # without the cgroups: mount the host's cpu hierarchy again, in that
  # command's mount namespace only.
  # A directory of this process's own, as ranks of one node start at once.
  root="${TMPDIR:-/tmp}/weft-cpu-cgroup.$$"
  mkdir -p "$root"
  if mount -t cgroup -o cpu cgroup "$root" 2> /dev/null; then
    v2=0
  elif mount -t cgroup2 cgroup2 "$root" 2> /dev/null; then
    v2=1
  else
    rmdir "$root"
    echo "cpu_share.sh: no cgroup cpu controller to cap ranks with (run as root, or --cpu-share off)" >&2
    exit 1
  fi
fi
if [ "${1:-}" = "--clean" ]; then
  for d in "$root/$tag"-*; do [ -d "$d" ] && rmdir "$d" 2>/dev/null || true; done
  exit 0
fi
[ $# -ge 2 ] || { echo "usage: cpu_share.sh SHARE CMD [ARGS...] | --clean" >&2; exit 2; }
share="$1"; shift
dir="$root/$tag-${WEFT_CPU_SHARE_ID:-${RANK:-0}}"
mkdir -p "$dir"
period="${WEFT_CPU_SHARE_PERIOD_US:-5000}"
quota=$(awk -v s="$share" -v p="$period" 'BEGIN { printf "%d", s * p }')
if [ "$v2" = 1 ]; then
  echo "$quota $period" > "$dir/cpu.max"
else
  echo "$period" > "$dir/cpu.cfs_period_us"
  echo "$quota" > "$dir/cpu.cfs_quota_us"
fi
echo $$ > "$dir/cgroup.procs"
# The mount point may go: the mount lives on in this mount namespace.
case "$root" in */weft-cpu-cgroup.*) umount -l "$root" 2> /dev/null; rmdir "$root" 2> /dev/null || true ;; esac
exec "$@"
