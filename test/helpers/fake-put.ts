/**
 * A stand-in for bench's put_bw GPU program (test fixture): PE 0 prints a ROW per size and mode (bytes, us,
 * GB/s), PE 1 a CHECK. FAKE_NO_GDA: GDA off; FAKE_PUT_FAIL_PE / FAKE_PUT_HANG_PE: that PE fails or hangs;
 * FAKE_BAD=gda|proxy|api: PE 1 finds that mode's bytes wrong. --modes as put_bw's (default gda,proxy); a run with
 * NVSHMEM_EFA_GDA_DEVICE_API=1 prints the finalize status line of a --device-api build (FAKE_API_OFF: says off).
 */
export const FAKE_PUT = `#!/usr/bin/env bash
r=$2; sizes=$6; modes=gda,proxy
while [ $# -gt 0 ]; do [ "$1" = --modes ] && modes=$2; shift; done
[ "\${FAKE_PUT_FAIL_PE:-}" = "$r" ] && { echo "FAIL PE $r: cudaMalloc: out of memory"; exit 1; }
[ "\${FAKE_PUT_HANG_PE:-}" = "$r" ] && exec sleep 300
echo "INFO PE $r: EFA GDA active: fake"
[ "$r" = 0 ] && [ -n "\${FAKE_NO_GDA:-}" ] && echo "SKIP gda EFA GDA off: not requested"
for s in \${sizes//,/ }; do
  n=\${s%[KM]}; case $s in *K) n=$((n << 10)) ;; *M) n=$((n << 20)) ;; esac
  for m in gda proxy api; do
    [[ ,$modes, == *,$m,* ]] || continue
    [ "$m" = gda ] && [ -n "\${FAKE_NO_GDA:-}" ] && continue
    us=$(case $m in gda) echo 2.000 ;; api) echo 4.000 ;; *) echo 8.000 ;; esac)
    [ "$r" = 0 ] && echo "ROW $n $m 10 $us $(awk -v b=$n -v u=$us 'BEGIN { printf "%.4f", b / (u * 1e3) }')"
    [ "$r" = 1 ] && echo "CHECK $n $m $([ "\${FAKE_BAD:-}" = $m ] && echo 'bad 3' || echo 'ok 0')"
  done
done
[ "\${NVSHMEM_EFA_GDA_DEVICE_API:-}" = 0 ] && echo "nvshmem-efa: PE $r at finalize: EFA GDA active; NVSHMEM device API over GDA off (NVSHMEM_EFA_GDA_DEVICE_API=0)"
[ "\${NVSHMEM_EFA_GDA_DEVICE_API:-}" = 1 ] && echo "nvshmem-efa: PE $r at finalize: EFA GDA active; NVSHMEM device API over GDA $([ -n "\${FAKE_API_OFF:-}" ] && echo 'off (GDA inactive)' || echo on)"
exit 0
`;
