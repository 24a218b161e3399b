"""What the device API hook executes when the switch is off, read from the SASS (nvdisasm -c) of NVSHMEM's transfer
functions, unpatched and hooked (issue 23's bar: "at most a uniform constant load and a branch").

  sass_off_path.py ORIG.sass HOOKED.sass [DIFF_DIR]

Per nvshmemi_transfer_* function of HOOKED that reads the slot (nvshmemi_efa_gda_api_d), it walks the path from the
entry with the slot off: straight on, following unconditional branches and the slot test's "off" side, counting every
instruction, until the first instruction of NVSHMEM's own code (the body). Where the off side only sets up a call
(the wrapper shape: the unchanged body moved into a function of its own), the body is the called function and the
walk goes on after the call, to the RET.

It then compares the body with the unpatched function of the same name: the hooked function less the hook's own
instructions (the slot load, its compare, the branch, the on side's call block) against the whole unpatched function
(or, in the wrapper shape, the called function against it). Counts of STL, LDL and register moves before and after,
and how many instructions differ (difflib over the instructions with addresses and labels taken out, registers kept).
"Entry saves" are the STLs before the first branch, call or return: the frame's saves, which every call makes (and
restores with as many LDLs before it returns); in the wrapper shape the wrapper's and the body's, added. DIFF_DIR gets
one file per function: its off path, then the unified diff of the body. A function of HOOKED that does not read the
slot is reported as "no hook", its whole body compared the same way. Tables in markdown: per function, then summed
per transfer function.
"""
import difflib, os, re, subprocess, sys

SLOT = 'nvshmemi_efa_gda_api_d'
INS = re.compile(r'^\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;\s*$')
LABEL = re.compile(r'^(\.L_x_\d+):')
FUNC = re.compile(r'^(_Z\w+):\s*$')
MOVES = ('MOV ', 'IMAD.MOV', 'MOV.')
# what a frame's restore and a return value's conversion after a call in tail position never contain
NOT_EPILOGUE = ('CALL', 'LDG', 'STG', 'LD', 'ST', 'ATOM', 'ATOMG', 'RED', 'BSSY', 'BSYNC', 'EXIT', 'BAR', 'MEMBAR')


def parse(path):
    """{function: {'ins': [instruction text in address order], 'labels': {label: index of its instruction}}}."""
    funcs, cur = {}, None
    for line in open(path):
        m = FUNC.match(line)
        if m:
            cur = m.group(1)
            funcs[cur] = {'ins': [], 'labels': {}}
            continue
        if cur is None:
            continue
        m = LABEL.match(line)
        if m:
            funcs[cur]['labels'][m.group(1)] = len(funcs[cur]['ins'])
            continue
        m = INS.match(line)
        if m:
            funcs[cur]['ins'].append(re.sub(r'\s+', ' ', m.group(2)))
    for f in funcs.values():  # drop the trailing self-branch and NOP padding
        ins = f['ins']
        while ins and (ins[-1] == 'NOP' or re.match(r'BRA `\(\.L_x_\d+\)$', ins[-1]) and
                       f['labels'].get(re.search(r'\.L_x_\d+', ins[-1]).group(0)) == len(ins) - 1):
            ins.pop()
    return funcs


def norm(i):
    i = re.sub(r'\(\(_Z\w+ \+ \.L_x_\d+@srel\)\)', '(RETADDR)', i)
    i = re.sub(r'\$str\$\d+', '$str', re.sub(r'__unnamed_\d+', '__unnamed', i))
    return re.sub(r'\.L_x_\d+', 'L', i)


def opcode(i):
    return re.sub(r'^@!?U?P\w+ ', '', i).split(' ')[0]


def stats(ins):
    return {'n': len(ins), 'STL': sum(opcode(i).startswith('STL') for i in ins),
            'LDL': sum(opcode(i).startswith('LDL') for i in ins),
            'mov': sum(re.sub(r'^@!?U?P\w+ ', '', i).startswith(MOVES) for i in ins)}


def entry_stl(ins):
    """The STLs before the first branch, call or return: the frame's saves, made on every path."""
    n = 0
    for t in ins:
        if opcode(t).split('.')[0] in ('BRA', 'CALL', 'RET', 'EXIT'):
            break
        n += opcode(t).startswith('STL')
    return n


def branch_target(f, i):
    m = re.search(r'BRA `\((\.L_x_\d+)\)', f['ins'][i])
    return f['labels'][m.group(1)] if m else None


def walk_off(f):
    """The off path: (instructions executed from the entry to the body, index of the first body instruction,
    the hook's own instruction indices, the on-side block's indices, the called body function or None, the
    instructions executed after the call up to the RET)."""
    ins = f['ins']
    if not any(SLOT in t for t in ins):
        return None
    slot_reg, pred, hook, path = None, None, set(), []
    i = 0
    for _ in range(len(ins) * 2):
        if i is None or i >= len(ins):
            return None
        t = ins[i]
        if SLOT in t and slot_reg is None:
            slot_reg = re.match(r'\S+ (U?R\d+)', t).group(1)
            hook.add(i); path.append(i); i += 1
            continue
        if slot_reg and pred is None and opcode(t).startswith('ISETP') and re.search(r'\b%s\b' % slot_reg, t):
            p = re.match(r'\S+ (U?P\d)', t).group(1)
            on_when_true = '.NE.' in t  # ISETP.NE p, RZ, slot: p = on; ISETP.EQ: p = off
            pred = (p, on_when_true)
            hook.add(i); path.append(i); i += 1
            continue
        m = re.match(r'@(!?)(U?P\d) (.*)', t)
        if pred and m and m.group(2) == pred[0]:
            p_true_when_off = not pred[1]
            executes = p_true_when_off != (m.group(1) == '!')
            if opcode(m.group(3)) == 'BRA':
                hook.add(i); path.append(i)
                tgt = branch_target(f, i)
                on_start = i + 1 if executes else tgt
                body = tgt if executes else i + 1
                on_block = set()
                j = on_start  # the on side: moves and a call into nvshmemi_efa_gda_api_*, then a branch away
                while j < len(ins):
                    on_block.add(j)
                    if opcode(ins[j]) in ('BRA', 'RET.ABS.NODEC', 'RET.REL.NODEC') or opcode(ins[j]) == 'EXIT':
                        break
                    j += 1
                return finish(f, path, body, hook, on_block)
            if executes:
                path.append(i)
            i += 1
            continue
        path.append(i)
        if opcode(t) == 'BRA' and not t.startswith('@'):
            i = branch_target(f, i)
            continue
        i += 1
    return None


def finish(f, path, body, hook, on_block):
    """From the body start: a call in tail position (reached by at most a few argument moves, then only the
    frame's restore and the return after it) makes the called function the body (the wrapper shape)."""
    ins, j, pre = f['ins'], body, []
    while j < len(ins) and len(pre) <= 8:
        t = ins[j]
        op = opcode(t)
        if op == 'BRA' and not t.startswith('@'):
            pre.append(j); j = branch_target(f, j)
            continue
        if op.startswith('CALL'):
            callee = re.search(r'\(([\w.]+)\)', t).group(1)
            post, k = [], j + 1
            for _ in range(len(ins)):
                post.append(k)
                if opcode(ins[k]).startswith('RET'):
                    break
                k = branch_target(f, k) if opcode(ins[k]) == 'BRA' and not ins[k].startswith('@') else k + 1
            epilogue = len(post) <= 12 and not any(ins[k].startswith('@') or opcode(ins[k]).split('.')[0] in NOT_EPILOGUE
                                                  for k in post)
            if epilogue:
                return path + pre + [j], j + 1, hook, on_block, callee, post
            break
        if t.startswith('@') or op.split('.')[0] in ('BRA', 'RET', 'EXIT', 'BSSY', 'BSYNC', 'WARPSYNC'):
            break
        pre.append(j); j += 1
    return path, body, hook, on_block, None, []


def demangle(names):
    out = subprocess.run(['c++filt'], input='\n'.join(names), capture_output=True, text=True).stdout.split('\n')
    return dict(zip(names, out))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    orig, hooked = parse(sys.argv[1]), parse(sys.argv[2])
    ddir = sys.argv[3] if len(sys.argv) > 3 else None
    if ddir:
        os.makedirs(ddir, exist_ok=True)
    names = sorted(n for n in orig if n in hooked and 'nvshmemi_transfer_' in n)
    dem = demangle(names)
    rows, agg = [], {}
    for n in names:
        f, g = hooked[n], orig[n]
        w = walk_off(f)
        if w is None:
            off, hook_only, body_ins, callee, post = None, 0, f['ins'], None, []
        else:
            path, _, hook, on_block, callee, post = w
            off = len(path)
            hook_only = len(hook)
            if callee:
                body_ins = hooked[callee]['ins'] if callee in hooked else []
            else:
                body_ins = [t for k, t in enumerate(f['ins']) if k not in hook and k not in on_block]
        a, b = [norm(t) for t in g['ins']], [norm(t) for t in body_ins]
        sm = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
        same = sum(bl.size for bl in sm.get_matching_blocks())
        sa, sb = stats(a), stats(b)
        short = re.sub(r'\([^()]*\)$', '', dem[n])
        if ddir:
            with open(os.path.join(ddir, n + '.diff'), 'w') as fh:
                fh.write(f'# {dem[n]}\n# off path ({off} instructions):\n')
                if w:
                    for k in w[0]:
                        fh.write(f'#   {f["ins"][k]}\n')
                    if post:
                        fh.write(f'# after the call, to the return ({len(post)}):\n')
                        for k in post:
                            fh.write(f'#   {f["ins"][k]}\n')
                fh.writelines(difflib.unified_diff([x + '\n' for x in a], [x + '\n' for x in b],
                                                   'unpatched', 'hooked body' + (f' ({callee})' if callee else ''), n=2))
        # the saves made on every call: the function's own, and in the wrapper shape the body's too
        est = (entry_stl(a), entry_stl(f['ins']) + (entry_stl(body_ins) if callee else 0))
        rows.append((short, off, hook_only, len(post), sa, sb, max(len(a), len(b)) - same, callee, est))
        base = re.search(r'nvshmemi_transfer_\w+', short).group(0)
        t = agg.setdefault(base, [0, [], 0, 0, 0, 0, 0, 0, 0, 0, 0])
        t[9] += est[0]; t[10] += est[1]
        t[0] += 1; t[1].append(off); t[2] += sa['STL']; t[3] += sb['STL']; t[4] += sa['LDL']; t[5] += sb['LDL']
        t[6] += sa['n']; t[7] += sb['n']; t[8] += max(len(a), len(b)) - same
    print('| function | off path: entry -> body (the hook\'s own) | after the body\'s return | entry saves (STL) unpatched -> hooked | body instrs unpatched -> hooked | STL | LDL | moves | instrs differing |')
    print('|---|---|---|---|---|---|---|---|---|')
    for short, off, h, post, sa, sb, diff, callee, est in rows:
        o = 'no hook' if off is None else f'{off} ({h})'
        print(f'| {short} | {o} | {post or "-"} | {est[0]} -> {est[1]} | {sa["n"]} -> {sb["n"]} | {sa["STL"]} -> {sb["STL"]} | '
              f'{sa["LDL"]} -> {sb["LDL"]} | {sa["mov"]} -> {sb["mov"]} | {diff} |')
    print()
    print('| function | instantiations | off path instrs entry -> body (min-max) | entry saves (STL) unpatched -> hooked (sum) | STL unpatched -> hooked (sum) | LDL (sum) | body instrs (sum) | instrs differing (sum) |')
    print('|---|---|---|---|---|---|---|---|')
    tot = [0] * 11
    for k, t in sorted(agg.items()):
        offs = [x for x in t[1] if x is not None]
        rng = (f'{min(offs)}-{max(offs)}' if min(offs) != max(offs) else f'{offs[0]}') if offs else 'no hook'
        print(f'| {k} | {t[0]} | {rng} | {t[9]} -> {t[10]} | {t[2]} -> {t[3]} | {t[4]} -> {t[5]} | {t[6]} -> {t[7]} | {t[8]} |')
        for i in (0, 2, 3, 4, 5, 6, 7, 8, 9, 10):
            tot[i] += t[i]
    print(f'| all | {tot[0]} | | {tot[9]} -> {tot[10]} | {tot[2]} -> {tot[3]} | {tot[4]} -> {tot[5]} | {tot[6]} -> {tot[7]} | {tot[8]} |')


main()
