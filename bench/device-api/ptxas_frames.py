"""Stack frame and spill bytes per nvshmemi_transfer_* function from two `ptxas -v` logs (before, after), as a
table and totals. Usage: ptxas_frames.py BEFORE.log AFTER.log"""
import re, subprocess, sys

from ptxas_log import parse


a, b = parse(sys.argv[1]), parse(sys.argv[2])
names = sorted(set(a) & set(b))
dem = subprocess.run(['c++filt'], input='\n'.join(names), capture_output=True, text=True).stdout.split('\n')
rows = [(re.sub(r'\(.*', '', dn), a[n], b[n]) for n, dn in zip(names, dem) if 'nvshmemi_transfer' in dn]
by = {}
for fn, x, y in rows:
    base = re.search(r'nvshmemi_transfer_\w+', fn).group(0)
    t = by.setdefault(base, [0, 0, 0, 0, 0])
    t[0] += 1; t[1] += x[0]; t[2] += y[0]; t[3] += x[1]; t[4] += y[1]
print('| function | instantiations | stack frame bytes before -> after (sum) | spill bytes before -> after (sum) |')
print('|---|---|---|---|')
for k, t in sorted(by.items()):
    print(f'| {k} | {t[0]} | {t[1]} -> {t[2]} | {t[3]} -> {t[4]} |')
tot = [sum(t[i] for t in by.values()) for i in range(5)]
print(f'| all | {tot[0]} | {tot[1]} -> {tot[2]} | {tot[3]} -> {tot[4]} |')
