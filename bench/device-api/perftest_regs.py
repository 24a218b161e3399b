"""Registers, stack and spills of NVSHMEM's perftest kernels per build of the device library, as a markdown table.

  perftest_regs.py OUT_DIR TEST... -- VARIANT...

For each test and variant, OUT_DIR/<variant>/<test>.o.res and <test>.dlink.res (cuobjdump -res-usage of the
perftest's own object and of its device link with that variant's libnvshmem_device.a) and <test>.ptxas.log (ptxas -v
of the perftest's compile: the kernel's own spills). Kernels only (the entries: ptxas's 'Compiling entry function'),
named by their demangled name less the parameters. The first variant is the baseline.
"""
import re, subprocess, sys

import ptxas_log

out = sys.argv[1]
sep = sys.argv.index('--')
tests, variants = sys.argv[2:sep], sys.argv[sep + 1:]


def res(path):
    d, cur = {}, None
    for line in open(path):
        m = re.match(r'\s*Function (\S+):', line)
        if m:
            cur = m.group(1)
            continue
        m = re.match(r'\s*REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)', line)
        if m and cur:
            d[cur] = tuple(int(x) for x in m.groups())
    return d


def ptxas(path):
    """{function: spill bytes (stores + loads)} from ptxas -v."""
    return {f: spills for f, (_, spills) in ptxas_log.parse(path).items()}


def kernels(path):
    return [m.group(1) for m in re.finditer(r"Compiling entry function '(\S+)'", open(path).read())]


def short(names):
    dem = subprocess.run(['c++filt'], input='\n'.join(names), capture_output=True, text=True).stdout.split('\n')
    return {n: re.sub(r'\([^()]*\)$', '', d) for n, d in zip(names, dem)}


head = '| test | kernel | registers before link | spill bytes (kernel) | ' + ' | '.join(
    f'{v}: registers / stack after link' for v in variants) + ' |'
print(head)
print('|' + '---|' * (4 + len(variants)))
changed = 0
for t in tests:
    base = f'{out}/{variants[0]}/{t}'
    ks = kernels(base + '.ptxas.log')
    nm = short(ks)
    pre = res(base + '.o.res')
    sp = ptxas(base + '.ptxas.log')
    post = {v: res(f'{out}/{v}/{t}.dlink.res') for v in variants}
    pre_v = {v: res(f'{out}/{v}/{t}.o.res') for v in variants}
    sp_v = {v: ptxas(f'{out}/{v}/{t}.ptxas.log') for v in variants}
    for k in ks:
        cells = []
        for v in variants:
            r = post[v].get(k)
            cells.append(f'{r[0]} / {r[1]}' if r else 'not linked')
        pre_cell = ' / '.join(sorted({str(pre_v[v].get(k, ('?',))[0]) for v in variants}))
        sp_cell = ' / '.join(sorted({str(sp_v[v].get(k, '?')) for v in variants}))
        if len(set(cells)) > 1:
            changed += 1
        print(f'| {t} | {nm[k]} | {pre_cell} | {sp_cell} | ' + ' | '.join(cells) + ' |')
print(f'\nkernels whose registers or stack after the device link differ between the variants: {changed}')
