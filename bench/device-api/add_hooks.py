import re, sys
src = open(sys.argv[1]).read()
HOOKS = {
    'nvshmemi_transfer_rma_p': 'return nvshmemi_efa_gda_api_rma_p<T>(rptr, value, pe);',
    'nvshmemi_transfer_rma_g': 'return nvshmemi_efa_gda_api_rma_g<T>(rptr, pe);',
    'nvshmemi_transfer_rma': 'return nvshmemi_efa_gda_api_rma<SCOPE, channel_op>(rptr, lptr, bytes, pe);',
    'nvshmemi_transfer_put_signal': 'return nvshmemi_efa_gda_api_put_signal<SCOPE>(rptr, lptr, bytes, sig_addr, signal, sig_op, pe, is_nbi);',
    'nvshmemi_transfer_rma_nbi': 'return nvshmemi_efa_gda_api_rma_nbi<SCOPE, channel_op>(rptr, lptr, bytes, pe);',
    'nvshmemi_transfer_amo_fetch': 'return nvshmemi_efa_gda_api_amo_fetch<T>(rptr, value, compare, pe, op);',
    'nvshmemi_transfer_amo_nonfetch': 'return nvshmemi_efa_gda_api_amo_nonfetch<T>(rptr, value, pe, op);',
    'nvshmemi_transfer_quiet': 'return nvshmemi_efa_gda_api_quiet<SCOPE>(use_membar);',
    'nvshmemi_transfer_fence': 'return nvshmemi_efa_gda_api_fence<SCOPE>();',
}
out = src
for name, call in HOOKS.items():
    m = re.search(r'\b' + name + r'\s*\([^)]*\)\s*\{\n', out)
    if not m: sys.exit(f'no {name}() with a body')
    out = out[:m.end()] + '    if (nvshmemi_efa_gda_api_d.on) ' + call + '\n' + out[m.end():]
inc = '#include "non_abi/device/pt-to-pt/ibgda_device.cuh"\n#endif\n'
if inc not in out: sys.exit('no ibgda_device.cuh include')
out = out.replace(inc, inc + '#include "nvshmemx_efa_gda_device_api.cuh"\n', 1)
open(sys.argv[2], 'w').write(src)
open(sys.argv[3], 'w').write(out)
