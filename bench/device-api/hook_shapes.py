"""Another shape of the device API hook, for measuring it against the patcher's (issue 23's bar: "at most a uniform
constant load and a branch when GDA is off"). An experiment: the patcher does not make it. (The caller shape this
file also made is what the patcher makes now.)

  hook_shapes.py wrapper HOOKED_TRANSFER_DEVICE DEST
      From a transfer_device.cuh.in the patcher hooked: each hooked function becomes a thin wrapper (the hook line,
      then `return <fn>_nvshmem<...>(args);`), and NVSHMEM's body, unchanged, moves into <fn>_nvshmem (also
      __noinline__). The body keeps its own frame; the wrapper's is the return address only.
"""
import re, sys


def wrapper(path, dest):
    src = open(path).read()
    HOOK = re.compile(r'[ \t]*/\* nvshmem-efa:begin device-api-hook:(\w+) \*/\n[ \t]*#ifdef NVSHMEMI_EFA_GDA_DEVICE_API\n(.*?)\n[ \t]*#endif\n[ \t]*/\* nvshmem-efa:end device-api-hook:\w+ \*/\n', re.S)
    out, pos = [], 0
    for m in HOOK.finditer(src):
        hook = m.group(2).strip()
        # the definition head: from 'template <' before the hook to the '{'
        head_start = src.rfind('template <', 0, m.start())
        head = src[head_start:m.start()]
        brace = head.rfind('{')
        sig = head[:brace]
        fn = re.search(r'(nvshmemi_transfer_\w+)\s*\(', sig).group(1)
        tparams = re.search(r'template\s*<([^>]*)>', sig).group(1)
        tnames = [p.split()[-1] for p in tparams.split(',')]
        params = sig[sig.index('(', sig.index(fn)) + 1: sig.rindex(')')]
        pnames = [re.search(r'(\w+)\s*$', p.strip()).group(1) for p in params.split(',') if p.strip()]
        # end of the body: match braces from the '{'
        depth, j = 0, head_start + brace
        while True:
            c = src[j]
            depth += c == '{'; depth -= c == '}'
            j += 1
            if depth == 0: break
        body_def = src[head_start:m.start()] + src[m.end():j]
        body_def = body_def.replace(fn + '(', fn + '_nvshmem(', 1)
        call = f"{fn}_nvshmem<{', '.join(tnames)}>({', '.join(pnames)})"
        wrapper = sig + '{\n#ifdef NVSHMEMI_EFA_GDA_DEVICE_API\n    ' + hook + '\n#endif\n    return ' + call + ';\n}'
        out.append(src[pos:head_start]); out.append(body_def + '\n\n' + wrapper); pos = j
    out.append(src[pos:])
    open(dest, 'w').write(''.join(out))


if __name__ == '__main__':
    if sys.argv[1] == 'wrapper':
        wrapper(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
