"""Two other shapes of the device API hook, for measuring them against the patcher's in-body hook (issue 23's bar:
"at most a uniform constant load and a branch when GDA is off"). Experiments: the patcher does not make these.

  hook_shapes.py wrapper HOOKED_TRANSFER_DEVICE DEST
      From a transfer_device.cuh.in the patcher hooked: each hooked function becomes a thin wrapper (the hook line,
      then `return <fn>_nvshmem<...>(args);`), and NVSHMEM's body, unchanged, moves into <fn>_nvshmem (also
      __noinline__). The body keeps its own frame; the wrapper's is the return address only.
  hook_shapes.py caller HOOKED_TREE
      In a tree the patcher hooked, in place: transfer_device.cuh.in's bodies unhooked again, plus explicit
      instantiations of the GDA entries there (the device library defines them); nvshmemi_transfer_api.cuh, which
      every application TU includes, declares the entries and redirects each nvshmemi_transfer_* call (a macro) to
      an inline `if (slot.on) entry(args); else nvshmemi_transfer_X(args);`: the application's kernel branches on
      the uniform constant and calls NVSHMEM's unchanged function.
"""
import re, sys, textwrap


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


def caller(t):
    td = f'{t}/src/include/non_abi/device/pt-to-pt/transfer_device.cuh.in'
    api = f'{t}/src/include/non_abi/device/pt-to-pt/nvshmemi_transfer_api.cuh'
    s = open(td).read()
    s = re.sub(r'[ \t]*/\* nvshmem-efa:begin device-api-hook:\w+ \*/\n.*?/\* nvshmem-efa:end device-api-hook:\w+ \*/\n', '', s, flags=re.S)
    if '#define TRANSFER_DEVICE_CUH\n' not in s:
        sys.exit(f'{td}: no #define TRANSFER_DEVICE_CUH')
    s = s.replace('#define TRANSFER_DEVICE_CUH\n', '#define TRANSFER_DEVICE_CUH\n#define NVSHMEMI_EFA_GDA_NO_CALLER_HOOK 1\n', 1)
    inst = textwrap.dedent(r'''
    #ifdef NVSHMEMI_EFA_GDA_DEVICE_API
    /* nvshmem-efa (caller-side shape): the GDA entries the applications' inline hooks call, defined here. */
    #define EFA_I_RMA_P(Type) template __device__ void nvshmemi_efa_gda_api_rma_p<Type>(void *, const Type, int);
    TRANSFER_REPT_FOR_STANDARD_RMA_TYPES(EFA_I_RMA_P)
    #define EFA_I_RMA_G(Type) template __device__ Type nvshmemi_efa_gda_api_rma_g<Type>(void *, int);
    TRANSFER_REPT_FOR_STANDARD_RMA_TYPES(EFA_I_RMA_G)
    #define EFA_I_RMA(SCOPE) \
        template __device__ void nvshmemi_efa_gda_api_rma<SCOPE, NVSHMEMI_OP_PUT>(void *, void *, size_t, int); \
        template __device__ void nvshmemi_efa_gda_api_rma<SCOPE, NVSHMEMI_OP_GET>(void *, void *, size_t, int); \
        template __device__ void nvshmemi_efa_gda_api_rma_nbi<SCOPE, NVSHMEMI_OP_PUT>(void *, void *, size_t, int); \
        template __device__ void nvshmemi_efa_gda_api_rma_nbi<SCOPE, NVSHMEMI_OP_GET>(void *, void *, size_t, int); \
        template __device__ void nvshmemi_efa_gda_api_put_signal<SCOPE>(void *, void *, size_t, void *, uint64_t, nvshmemi_amo_t, int, bool); \
        template __device__ void nvshmemi_efa_gda_api_quiet<SCOPE>(bool); \
        template __device__ void nvshmemi_efa_gda_api_fence<SCOPE>();
    TRANSFER_REPT_FOR_ALL_SCOPES(EFA_I_RMA)
    #define EFA_I_AMO(Type) \
        template __device__ Type nvshmemi_efa_gda_api_amo_fetch<Type>(void *, Type, Type, int, nvshmemi_amo_t); \
        template __device__ void nvshmemi_efa_gda_api_amo_nonfetch<Type>(void *, Type, int, nvshmemi_amo_t);
    TRANSFER_REPT_FOR_STANDARD_AMO_TYPES(EFA_I_AMO)
    TRANSFER_REPT_FOR_EXTENDED_AMO_TYPES(EFA_I_AMO)
    #endif
    ''')
    i = s.rindex('#endif /* __CUDA_ARCH__ */')
    s = s[:i] + inst + s[i:]
    open(td, 'w').write(s)

    a = open(api).read()
    hook = textwrap.dedent(r'''
    /* nvshmem-efa (caller-side shape): the device API hook in the application's own code. */
    #if !defined(NVSHMEM_IBGDA_SUPPORT) && !defined(__clang_llvm_bitcode_lib__) && !defined(NVSHMEMI_EFA_GDA_NO_CALLER_HOOK)
    #include "nvshmem_efa/nvshmemx_efa_gda_api.h"
    extern __constant__ nvshmemx_efa_gda_api_slot_t nvshmemi_efa_gda_api_d;
    template <typename T> __device__ void nvshmemi_efa_gda_api_rma_p(void *rptr, const T value, int pe);
    template <typename T> __device__ T nvshmemi_efa_gda_api_rma_g(void *rptr, int pe);
    template <threadgroup_t SCOPE, nvshmemi_op_t channel_op> __device__ void nvshmemi_efa_gda_api_rma(void *rptr, void *lptr, size_t bytes, int pe);
    template <threadgroup_t SCOPE, nvshmemi_op_t channel_op> __device__ void nvshmemi_efa_gda_api_rma_nbi(void *rptr, void *lptr, size_t bytes, int pe);
    template <threadgroup_t SCOPE> __device__ void nvshmemi_efa_gda_api_put_signal(void *rptr, void *lptr, size_t bytes, void *sig_addr, uint64_t signal, nvshmemi_amo_t sig_op, int pe, bool is_nbi);
    template <typename T> __device__ T nvshmemi_efa_gda_api_amo_fetch(void *rptr, T value, T compare, int pe, nvshmemi_amo_t op);
    template <typename T> __device__ void nvshmemi_efa_gda_api_amo_nonfetch(void *rptr, T value, int pe, nvshmemi_amo_t op);
    template <threadgroup_t SCOPE> __device__ void nvshmemi_efa_gda_api_quiet(bool use_membar);
    template <threadgroup_t SCOPE> __device__ void nvshmemi_efa_gda_api_fence();

    #define NVSHMEMI_EFA_GDA_ON (nvshmemi_efa_gda_api_d.on)
    template <typename T> __device__ __forceinline__ void nvshmemi_efa_gda_hook_rma_p(void *rptr, const T value, int pe) {
        if (NVSHMEMI_EFA_GDA_ON) nvshmemi_efa_gda_api_rma_p<T>(rptr, value, pe); else nvshmemi_transfer_rma_p<T>(rptr, value, pe);
    }
    template <typename T> __device__ __forceinline__ T nvshmemi_efa_gda_hook_rma_g(void *rptr, int pe) {
        if (NVSHMEMI_EFA_GDA_ON) return nvshmemi_efa_gda_api_rma_g<T>(rptr, pe); else return nvshmemi_transfer_rma_g<T>(rptr, pe);
    }
    template <threadgroup_t SCOPE, nvshmemi_op_t channel_op> __device__ __forceinline__ void nvshmemi_efa_gda_hook_rma(void *rptr, void *lptr, size_t bytes, int pe) {
        if (NVSHMEMI_EFA_GDA_ON) nvshmemi_efa_gda_api_rma<SCOPE, channel_op>(rptr, lptr, bytes, pe); else nvshmemi_transfer_rma<SCOPE, channel_op>(rptr, lptr, bytes, pe);
    }
    template <threadgroup_t SCOPE, nvshmemi_op_t channel_op> __device__ __forceinline__ void nvshmemi_efa_gda_hook_rma_nbi(void *rptr, void *lptr, size_t bytes, int pe) {
        if (NVSHMEMI_EFA_GDA_ON) nvshmemi_efa_gda_api_rma_nbi<SCOPE, channel_op>(rptr, lptr, bytes, pe); else nvshmemi_transfer_rma_nbi<SCOPE, channel_op>(rptr, lptr, bytes, pe);
    }
    template <threadgroup_t SCOPE> __device__ __forceinline__ void nvshmemi_efa_gda_hook_put_signal(void *rptr, void *lptr, size_t bytes, void *sig_addr, uint64_t signal, nvshmemi_amo_t sig_op, int pe, bool is_nbi) {
        if (NVSHMEMI_EFA_GDA_ON) nvshmemi_efa_gda_api_put_signal<SCOPE>(rptr, lptr, bytes, sig_addr, signal, sig_op, pe, is_nbi); else nvshmemi_transfer_put_signal<SCOPE>(rptr, lptr, bytes, sig_addr, signal, sig_op, pe, is_nbi);
    }
    template <typename T> __device__ __forceinline__ T nvshmemi_efa_gda_hook_amo_fetch(void *rptr, T value, T compare, int pe, nvshmemi_amo_t op) {
        if (NVSHMEMI_EFA_GDA_ON) return nvshmemi_efa_gda_api_amo_fetch<T>(rptr, value, compare, pe, op); else return nvshmemi_transfer_amo_fetch<T>(rptr, value, compare, pe, op);
    }
    template <typename T> __device__ __forceinline__ void nvshmemi_efa_gda_hook_amo_nonfetch(void *rptr, T value, int pe, nvshmemi_amo_t op) {
        if (NVSHMEMI_EFA_GDA_ON) nvshmemi_efa_gda_api_amo_nonfetch<T>(rptr, value, pe, op); else nvshmemi_transfer_amo_nonfetch<T>(rptr, value, pe, op);
    }
    template <threadgroup_t SCOPE> __device__ __forceinline__ void nvshmemi_efa_gda_hook_quiet(bool use_membar) {
        if (NVSHMEMI_EFA_GDA_ON) nvshmemi_efa_gda_api_quiet<SCOPE>(use_membar); else nvshmemi_transfer_quiet<SCOPE>(use_membar);
    }
    template <threadgroup_t SCOPE> __device__ __forceinline__ void nvshmemi_efa_gda_hook_fence() {
        if (NVSHMEMI_EFA_GDA_ON) nvshmemi_efa_gda_api_fence<SCOPE>(); else nvshmemi_transfer_fence<SCOPE>();
    }
    #define nvshmemi_transfer_rma_p nvshmemi_efa_gda_hook_rma_p
    #define nvshmemi_transfer_rma_g nvshmemi_efa_gda_hook_rma_g
    #define nvshmemi_transfer_rma nvshmemi_efa_gda_hook_rma
    #define nvshmemi_transfer_rma_nbi nvshmemi_efa_gda_hook_rma_nbi
    #define nvshmemi_transfer_put_signal nvshmemi_efa_gda_hook_put_signal
    #define nvshmemi_transfer_amo_fetch nvshmemi_efa_gda_hook_amo_fetch
    #define nvshmemi_transfer_amo_nonfetch nvshmemi_efa_gda_hook_amo_nonfetch
    #define nvshmemi_transfer_quiet nvshmemi_efa_gda_hook_quiet
    #define nvshmemi_transfer_fence nvshmemi_efa_gda_hook_fence
    #endif
    ''')
    i = a.rindex('#endif /* _NVSHMEMI_TRANSFER_H_ */')
    a = a[:i] + hook + a[i:]
    open(api, 'w').write(a)


if __name__ == '__main__':
    if sys.argv[1] == 'wrapper':
        wrapper(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == 'caller':
        caller(sys.argv[2])
    else:
        sys.exit(__doc__)
