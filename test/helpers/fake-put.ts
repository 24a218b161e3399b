/**
 * A stand-in for bench's put_bw GPU program (test fixture): PE 0 prints a ROW per size and mode (bytes, us,
 * GB/s), PE 1 a CHECK. FAKE_NO_GDA: GDA off; FAKE_PUT_FAIL_PE / FAKE_PUT_HANG_PE: that PE fails or hangs;
 * FAKE_BAD=gda|proxy: PE 1 finds that mode's bytes wrong.
 */
export const FAKE_PUT = `#!/usr/bin/env bash
r=$2; sizes=$6
[ "\${FAKE_PUT_FAIL_PE:-}" = "$r" ] && { echo "FAIL PE $r: cudaMalloc: out of memory"; exit 1; }
[ "\${FAKE_PUT_HANG_PE:-}" = "$r" ] && exec sleep 300
echo "INFO PE $r: EFA GDA active: fake"
[ "$r" = 0 ] && [ -n "\${FAKE_NO_GDA:-}" ] && echo "SKIP gda EFA GDA off: not requested"
for s in \${sizes//,/ }; do
  n=\${s%[KM]}; case $s in *K) n=$((n << 10)) ;; *M) n=$((n << 20)) ;; esac
  for m in gda proxy; do
    [ "$m" = gda ] && [ -n "\${FAKE_NO_GDA:-}" ] && continue
    us=$([ $m = gda ] && echo 2.000 || echo 8.000)
    [ "$r" = 0 ] && echo "ROW $n $m 10 $us $(awk -v b=$n -v u=$us 'BEGIN { printf "%.4f", b / (u * 1e3) }')"
    [ "$r" = 1 ] && echo "CHECK $n $m $([ "\${FAKE_BAD:-}" = $m ] && echo 'bad 3' || echo 'ok 0')"
  done
done
exit 0
`;
