// Store order in the compiled GDA post path (issue 37 item 3). The CPU model of the device code runs on x86, which
// keeps stores in order, so no CPU test can see a missing system fence before a doorbell: this reads the PTX nvcc
// makes of every way the device API and the DeepEP shim ring a doorbell (test/native/ptx/gda_post_path.cu) and
// checks the fences and the order the design needs (test/native/ptx/ptx-order.ts says which). Each rule is shown
// able to fail on every run: a mutant copy of the templates, made here by a text replacement, must be caught.
import { describe, expect, it } from 'vitest';
import { type Edit, fixturePtx, NO_NVCC } from './ptx/compile-fixture.ts';
import { callsFunction, checkBeforeDoorbells, checkDoorbellOrder, type Insn, parsePtx, type PtxFunction } from './ptx/ptx-order.ts';

// .ci/run sets it: there the check may not be skipped, and a missing nvcc fails it.
const REQUIRED = process.env.NVSHMEM_EFA_PTX_TEST === '1';
if (NO_NVCC && !REQUIRED) console.warn(`skipping the store-order check of the GDA post path: ${NO_NVCC}`);

const KERNELS = ['gda_put', 'gda_put_imm', 'gda_signal', 'gda_handle_put', 'gda_warp_batch', 'gda_owned_put', 'shim_put', 'shim_signal'];
const SHIM_WAIT = 'nvshmem_efa_shim_gda_quiet_rail_checked';
const isBulkWait = (x: Insn) => x.op === 'cp.async.bulk.wait_group';
const isProxyFence = (x: Insn) => x.op === 'fence.proxy.async.global';

/** Every rule broken in the given kernels of the fixture's PTX, as "kernel: why (instruction)"; empty when all hold. */
function judge(fns: PtxFunction[], kernels: string[]): string[] {
  const out: string[] = [];
  for (const k of kernels) {
    const fn = fns.find((f) => f.name === k);
    if (!fn) {
      out.push(`${k}: not in the PTX`);
      continue;
    }
    const r = checkDoorbellOrder(fn);
    // Without a doorbell store found, every rule would hold vacuously.
    if (!r.doorbells.length) out.push(`${k}: no doorbell store found`);
    out.push(...r.findings.map((f) => `${k}: ${f.why} (${f.insn})`));
    const before = (first: (x: Insn) => boolean, what: string) =>
      out.push(...checkBeforeDoorbells(fn, first, what).findings.map((f) => `${k}: ${f.why} (${f.insn})`));
    if (k === 'shim_signal') before((x) => callsFunction(x, SHIM_WAIT), `the wait for its payload (${SHIM_WAIT})`);
    if (k === 'shim_put') {
      before(isBulkWait, 'the wait for the bulk async stores (cp.async.bulk.wait_group)');
      before(isProxyFence, 'the async-proxy fence (fence.proxy.async.global)');
    }
  }
  return out;
}

const QUEUE = 'nvshmemx_efa_gda_device_queue.cuh';
const OWNED = 'nvshmemx_efa_gda_device_owned.cuh';
const SHIM = 'nvshmem_efa_shim.cuh';
const BASE = 'nvshmemx_efa_gda_device_base.cuh';
const RING = 'efa_gda_mmio_store(q.db, (slot + n) & 0xffffu);';
const FENCE = 'efa_gda_fence_nic();';
/** Each mutant breaks one rule of the design; the check must say which, in the kernel named (compiled alone). */
const MUTANTS: [string, Edit[], string, RegExp][] = [
  ["efa_gda_ring without the system fence before its doorbell store", [{ file: QUEUE, from: `${FENCE}\n    ${RING}`, to: RING }], 'gda_put',
    /^gda_put: doorbell store reachable from an earlier store with no system fence/],
  ["efa_gda_ring without the system fence between its doorbell store and sq_rung", [{ file: QUEUE, from: `${RING}\n    ${FENCE}`, to: RING }], 'gda_put',
    /^gda_put: store reachable from a doorbell store with no system fence/],
  ['efa_gda_ring with the doorbell stored before the fence that covers the WQE (the store moved up)',
    [{ file: QUEUE, from: `${FENCE}\n    ${RING}`, to: `${RING}\n    ${FENCE}` }], 'gda_put',
    /^gda_put: doorbell store reachable from an earlier store with no system fence/],
  ["the post path's fence at GPU scope, not system scope",
    [{ file: BASE, from: 'asm volatile("fence.release.sys;" ::: "memory");', to: 'asm volatile("fence.release.gpu;" ::: "memory");' }], 'gda_put',
    /^gda_put: (doorbell store reachable from an earlier (doorbell )?store|store reachable from a doorbell store) with no system fence/],
  ['efa_gda_ring with a plain (not volatile) doorbell store', [{ file: QUEUE, from: RING, to: '*q.db = (slot + n) & 0xffffu;' }], 'gda_put',
    /^gda_put: doorbell store is not volatile/],
  ["an owned queue's post without the system fence before its doorbell store",
    [{ file: OWNED, from: `${FENCE}\n        efa_gda_mmio_store(h.q.db,`, to: 'efa_gda_mmio_store(h.q.db,' }], 'gda_owned_put',
    /^gda_owned_put: doorbell store reachable from an earlier store with no system fence/],
  ["the shim's signal without its wait for the payload",
    [{ file: SHIM, from: `    if (!${SHIM_WAIT}(gda, rail, pe))\n        return;\n`, to: '' }], 'shim_signal',
    /^shim_signal: doorbell store reachable without the wait for its payload/],
  ["the shim's put without the async-proxy fence",
    [{ file: SHIM, from: '    asm volatile("fence.proxy.async.global;" ::: "memory");\n', to: '' }], 'shim_put',
    /^shim_put: doorbell store reachable without the async-proxy fence/],
];

const group = `store order in the compiled GDA post path (nvcc -ptx, sm_90)${NO_NVCC && !REQUIRED ? ` [skipped: ${NO_NVCC}]` : ''}`;
describe.skipIf(!!NO_NVCC && !REQUIRED)(group, () => {
  it(`every doorbell store of ${KERNELS.length} kernels is volatile and fenced (system scope) from the stores before and after it; the shim's signal rings after its wait, its put after the bulk-store wait and the async-proxy fence`, async () => {
    const fns = parsePtx(await fixturePtx());
    expect(judge(fns, KERNELS)).toEqual([]);
    // The owned queue rings itself (not through efa_gda_ring): a doorbell of its own besides the general way's.
    const doorbells = (k: string) => checkDoorbellOrder(fns.find((f) => f.name === k)!).doorbells.length;
    expect(doorbells('gda_owned_put')).toBeGreaterThan(doorbells('gda_handle_put'));
  }, 180_000);

  it.each(MUTANTS)('catches a copy of the templates with %s', async (_name, edits, kernel, caught) => {
    const found = judge(parsePtx(await fixturePtx(edits, ['GDA_PTX_ONLY', `GDA_PTX_ONLY_${kernel}`])), [kernel]);
    expect(found).not.toEqual([]);
    // Every finding is the rule this mutant breaks: the check says what is wrong, not merely that something is.
    expect(found.filter((f) => !caught.test(f))).toEqual([]);
  }, 180_000);
});

// The reader itself on PTX written here: branches are followed, a fence on one path only is not enough.
describe('the PTX store-order reader', () => {
  // A queue at %rd1 + 64: its four constant loads, then the doorbell pointer (%rd11) and a WQE pointer (%rd10).
  const head = `
.visible .entry k(.param .u64 k_p0, .param .u32 k_p1)
{
  .reg .b64 %rd<32>; .reg .b32 %r<8>; .reg .pred %p<4>;
  ld.param.u64 %rd1, [k_p0];
  ld.param.u32 %r1, [k_p1];
  add.s64 %rd2, %rd1, 64;
  ld.global.nc.v2.u64 {%rd10,%rd11}, [%rd2];
  ld.global.nc.v2.u64 {%rd12,%rd13}, [%rd2+16];
  ld.global.nc.v2.u64 {%rd14,%rd15}, [%rd2+48];
  ld.global.nc.v2.u64 {%rd16,%rd17}, [%rd2+64];
  mov.u64 %rd20, %rd11;
  setp.eq.s32 %p1, %r1, 0;
  st.volatile.u64 [%rd10], %rd12;
`;
  const judgeOne = (body: string) => checkDoorbellOrder(parsePtx(`${head}${body}\n}\n`)[0]!);

  it('finds the doorbell store through a copy of the pointer and passes a fenced one', () => {
    const r = judgeOne('  membar.sys;\n  st.volatile.u32 [%rd20], %r1;\n  membar.sys;\n  st.volatile.global.u32 [%rd2+40], %r1;\n  ret;');
    expect(r.doorbells).toHaveLength(1);
    expect(r.findings).toEqual([]);
  });
  it('flags a fence that only one branch passes, and a gpu-scope fence', () => {
    const oneBranch = judgeOne('  @%p1 bra $L1;\n  membar.sys;\n$L1:\n  st.volatile.u32 [%rd20], %r1;\n  membar.sys;\n  ret;');
    expect(oneBranch.findings.map((f) => f.why)).toEqual(['doorbell store reachable from an earlier store with no system fence between them']);
    const gpuScope = judgeOne('  membar.gl;\n  st.volatile.u32 [%rd20], %r1;\n  membar.sys;\n  ret;');
    expect(gpuScope.findings).toHaveLength(1);
  });
  it('flags a store after the doorbell with no fence, and a plain doorbell store', () => {
    const r = judgeOne('  membar.sys;\n  st.u32 [%rd20], %r1;\n  st.volatile.global.u32 [%rd2+40], %r1;\n  ret;');
    expect(r.findings.map((f) => f.why).sort()).toEqual([
      'doorbell store is not volatile, .mmio or a system-scope release',
      'store reachable from a doorbell store with no system fence between them',
    ]);
  });
  it('follows a loop back to its head: a fence before the loop does not cover the next round', () => {
    const r = judgeOne('  membar.sys;\n$L2:\n  st.volatile.u32 [%rd20], %r1;\n  membar.sys;\n  st.volatile.u64 [%rd10], %rd12;\n  @%p1 bra $L2;\n  ret;');
    expect(r.findings.map((f) => f.why)).toEqual(['doorbell store reachable from an earlier store with no system fence between them']);
  });
  it('requires what must come first on every path to the doorbell', () => {
    const fn = parsePtx(`${head}  @%p1 bra $L3;\n  call.uni wait_first, (%rd1);\n$L3:\n  membar.sys;\n  st.volatile.u32 [%rd20], %r1;\n  ret;\n}\n`)[0]!;
    const r = checkBeforeDoorbells(fn, (x) => callsFunction(x, 'wait_first'), 'the wait');
    expect(r.seen).toBe(1);
    expect(r.findings.map((f) => f.why)).toEqual(['doorbell store reachable without the wait before it']);
  });
  it('fails a kernel where it finds no doorbell store (no queue constants loaded), rather than pass it', () => {
    const fns = parsePtx('.visible .entry gda_put(.param .u64 p)\n{\n  ld.param.u64 %rd1, [p];\n  st.volatile.u32 [%rd1], 1;\n  ret;\n}\n');
    expect(judge(fns, ['gda_put', 'shim_put'])).toEqual(['gda_put: no doorbell store found', 'shim_put: not in the PTX']);
  });
});
