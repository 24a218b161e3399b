#!/usr/bin/env bash
# Runs a command in a private mount namespace where /sys/class/infiniband/efaemu<N>/device exists, pointing at
# a PCI function (by default the host's GPUs, in PCI order: NIC N sits "next to" GPU N). NVSHMEM resolves each
# libfabric NIC through that path and fails init without it; a real EFA host has it, an emulated NIC needs
# this. Test-only: nothing outside the namespace changes, and it ends with the command.
#
#   sysfs-ns.sh [--device /sys/bus/pci/devices/<bdf>]... [--hostname NAME] [--] command [args...]
#
# A device named twice gets two NICs: `--device G --device G` puts efaemu0 and efaemu1 both at G, as a p5en puts
# 2 EFA NICs behind each GPU's switch, so multi-rail NVSHMEM (3.6+), which gives each PE the NICs nearest its GPU,
# selects both for the PE on G. NVSHMEM divides a node's NICs among the PEs with the same host name, so a PE
# that is to get both NICs of its GPU must be alone on its "node": --hostname also makes a private UTS namespace
# with that host name (each PE of a test its own). A nested call (inside another sysfs-ns.sh) must clear
# EFAEMU_SYSFS_NS (env -u EFAEMU_SYSFS_NS) to get a namespace of its own.
#
# Needs CAP_SYS_ADMIN (root, or a container allowed to unshare). Exit status: the command's, or 3 when the
# namespace cannot be made (the message says why).
set -euo pipefail

if [ -z "${EFAEMU_SYSFS_NS:-}" ]; then
  command -v unshare >/dev/null || { echo "sysfs-ns: unshare(1) not found (util-linux)" >&2; exit 3; }
  uts=()
  for a in "$@"; do
    [ "$a" = -- ] && break
    [ "$a" = --hostname ] && uts=(--uts)
  done
  exec unshare --mount "${uts[@]}" --propagation private env EFAEMU_SYSFS_NS=1 "$0" "$@" \
    || { echo "sysfs-ns: unshare --mount ${uts[*]} failed (needs CAP_SYS_ADMIN)" >&2; exit 3; }
fi

devices=()
host=
while [ $# -gt 0 ]; do
  case "$1" in
    --device) devices+=("$2"); shift 2 ;;
    --hostname) host=$2; shift 2 ;;
    --) shift; break ;;
    *) break ;;
  esac
done
[ $# -gt 0 ] || { echo "usage: sysfs-ns.sh [--device <pci dir>]... [--hostname NAME] [--] command [args...]" >&2; exit 3; }
if [ -n "$host" ]; then
  echo "$host" >/proc/sys/kernel/hostname || { echo "sysfs-ns: cannot set the host name in the UTS namespace" >&2; exit 3; }
  echo "sysfs-ns: host name $host" >&2
fi

if [ ${#devices[@]} -eq 0 ]; then
  # NVIDIA display/3D controllers (class 0x03xxxx, vendor 0x10de), in PCI order.
  for d in /sys/bus/pci/devices/*; do
    [ "$(cat "$d/vendor" 2>/dev/null)" = "0x10de" ] || continue
    case "$(cat "$d/class" 2>/dev/null)" in 0x03*) devices+=("$d") ;; esac
  done
fi
[ ${#devices[@]} -gt 0 ] || { echo "sysfs-ns: no GPU found and no --device given" >&2; exit 3; }

cls=/sys/class/infiniband
if [ ! -d "$cls" ]; then
  # No RDMA stack loaded: /sys/class has no infiniband directory and sysfs cannot grow one. Put a tmpfs over
  # /sys/class and bind every original class back, then add infiniband.
  keep=$(mktemp -d)
  mount --bind /sys/class "$keep"
  mount -t tmpfs -o mode=755 efaemu-sysclass /sys/class
  for c in "$keep"/*; do
    n=$(basename "$c")
    mkdir "/sys/class/$n"
    mount --bind "$c" "/sys/class/$n"
  done
  mkdir "$cls"
else
  mount -t tmpfs -o mode=755 efaemu-ib "$cls"
fi

i=0
for d in "${devices[@]}"; do
  real=$(readlink -f "$d")
  [ -d "$real" ] || { echo "sysfs-ns: $d is not a directory" >&2; exit 3; }
  mkdir "$cls/efaemu$i"
  ln -s "$real" "$cls/efaemu$i/device"
  echo "sysfs-ns: $cls/efaemu$i/device -> $real" >&2
  i=$((i + 1))
done
export EFAEMU_NICS=${EFAEMU_NICS:-$i}
exec "$@"
