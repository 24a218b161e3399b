#!/usr/bin/env bash
# ABI conformance of nvshmem-efa's test headers against upstream headers: every size, offset, mask and
# value the GDA code uses must be identical. (sizeof(fi_efa_wq_attr) is 32 bytes from v2.3.0 to HEAD: the
# uint16_t caps added after v2.6.0 sits in what was tail padding; the transport keeps spare bytes after
# the struct anyway, since query_qp_wqs fills the run-time library's version of it.)
#   abi_check.sh [--io DIR]... [--fi INCLUDE_DIR]...
# --io DIR: a directory holding an upstream efa_io_defs.h (rdma-core providers/efa)
# --fi DIR: an include directory holding an upstream rdma/fi_ext_efa.h with libfabric's rdma/*.h
# Exits 0 when every comparison matched, 1 on a mismatch, 2 when nothing was given to compare.
set -u
here=$(cd "$(dirname "$0")" && pwd)
cxx=${CXX:-g++}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
io=() fi=()
while [ $# -gt 0 ]; do
  case $1 in
    --io) io+=("$2"); shift 2 ;;
    --fi) fi+=("$2"); shift 2 ;;
    *) echo "usage: $0 [--io DIR]... [--fi INCLUDE_DIR]..." >&2; exit 2 ;;
  esac
done
[ ${#io[@]} -eq 0 ] && [ ${#fi[@]} -eq 0 ] && { echo "abi_check: nothing to compare" >&2; exit 2; }
dump() { # name, defines and include flags...
  local name=$1; shift
  "$cxx" -std=c++11 -o "$tmp/$name" "$here/abi_dump.cpp" "$@" && "$tmp/$name" > "$tmp/$name.txt"
}
status=0
compare() { # label, ours.txt, theirs.txt
  if diff -u "$2" "$3" > "$tmp/diff"; then
    echo "match: $1 ($(wc -l < "$2") definitions)"
  else
    echo "MISMATCH: $1"; cat "$tmp/diff"; status=1
  fi
}
if [ ${#io[@]} -gt 0 ]; then
  dump ours_io -DDUMP_IO -I "$here" || exit 1
  for d in "${io[@]}"; do
    n=up_io_$RANDOM
    dump $n -DDUMP_IO -I "$d" || { echo "MISMATCH: $d/efa_io_defs.h does not compile with the fields nvshmem-efa uses"; status=1; continue; }
    compare "test/efa_abi/efa_io_defs.h vs $d/efa_io_defs.h" "$tmp/ours_io.txt" "$tmp/$n.txt"
  done
fi
if [ ${#fi[@]} -gt 0 ]; then
  for d in "${fi[@]}"; do
    n=up_fi_$RANDOM
    # Ours takes rdma/fabric.h and friends from the same libfabric, which need not be installed here.
    dump ours_$n -DDUMP_FI -I "$here/include" -I "$d" || exit 1
    dump $n -DDUMP_FI -I "$d" || { echo "MISMATCH: $d/rdma/fi_ext_efa.h does not compile with the fields nvshmem-efa uses"; status=1; continue; }
    compare "test/efa_abi/include/rdma/fi_ext_efa.h vs $d/rdma/fi_ext_efa.h" "$tmp/ours_$n.txt" "$tmp/$n.txt"
  done
fi
exit $status
