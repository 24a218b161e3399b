import { staticLibInstallTail } from '../../src/patchers/nvshmem/cmake.ts';
import { describe, expect, it } from 'vitest';
import { indexCpp } from '../../src/patchers/engine/cpp.ts';
import { detectLayout } from '../../src/patchers/nvshmem/layout.ts';

/** libfabric.h shapes written for this test: only the two structs the detection reads. */
const MULTI_STATE = `
#include <vector>
typedef struct {
    struct fi_info *all_prov_info;
    std::vector<struct fi_info *> prov_infos;
    std::vector<struct fid_fabric *> fabrics;
    std::vector<struct fid_domain *> domains;
    std::vector<nvshmemt_libfabric_endpoint_t *> eps;
    nvshmemt_libfabric_provider provider;
    int max_nic_per_pe;
    int num_selected_devs;
    int num_selected_domains;
} nvshmemt_libfabric_state_t;
`;
const handle = (hdls: string) => `typedef struct {\n    void *buf;\n    nvshmemt_libfabric_mem_handle_ep_t ${hdls};\n} nvshmemt_libfabric_mem_handle_t;\n`;
const detect = async (src: string) => detectLayout(await indexCpp(src));

describe('NVSHMEM libfabric layout detection', () => {
  it('multi-rail: the state vectors and counts, and one memory-handle slot per domain', async () => {
    expect(await detect(MULTI_STATE + handle('hdls[1 + NVSHMEMT_LIBFABRIC_MAX_NIC_PER_PE]'))).toMatchObject({ layout: { id: 'multi-rail' } });
  });

  it('refuses multi-rail state vectors with a memory handle of another size, naming it', async () => {
    const r = await detect(MULTI_STATE + handle('hdls[2]'));
    expect(r).toEqual({ refuse: expect.stringContaining('nvshmemt_libfabric_mem_handle_t has `nvshmemt_libfabric_mem_handle_ep_t hdls[2];`') });
    expect(await detect(MULTI_STATE)).toEqual({ refuse: expect.stringContaining('nvshmemt_libfabric_mem_handle_t has no hdls field') });
  });

  it('single-rail: one fabric, domain and fi_info', async () => {
    const src = 'typedef struct {\n    struct fi_info *prov_info;\n    struct fid_fabric *fabric;\n    struct fid_domain *domain;\n    nvshmemt_libfabric_endpoint_t *eps;\n    nvshmemt_libfabric_provider provider;\n} nvshmemt_libfabric_state_t;\n';
    expect(await detect(src)).toMatchObject({ layout: { id: 'single-rail' } });
  });

  it('refuses a state of neither shape naming what each lacks, and a file without the struct', async () => {
    const noCounts = MULTI_STATE.replace('    int num_selected_domains;\n', '') + handle('hdls[1 + NVSHMEMT_LIBFABRIC_MAX_NIC_PER_PE]');
    const r = await detect(noCounts);
    expect('refuse' in r && r.refuse).toMatch(/single-rail lacks fabric, domain, prov_info, eps; multi-rail lacks or differs in num_selected_domains \(found /);
    expect(await detect('struct other { int x; };')).toEqual({ refuse: 'no struct nvshmemt_libfabric_state_t defined' });
  });
});

describe("NVSHMEM 3.4's combined static library", () => {
  const pristine = 'install(\n\tTARGETS nvshmem nvshmem_host nvshmem-info ${ACTIVE_BOOTSTRAPS} ${ACTIVE_TRANSPORTS}\n  EXPORT NVSHMEMTargets\n)\n';

  it('finds what follows nvshmem-info on the install line, pristine or patched, so the patch is the same both times', () => {
    expect(staticLibInstallTail(pristine)).toBe(' ${ACTIVE_BOOTSTRAPS} ${ACTIVE_TRANSPORTS}');
    const patched = pristine.replace('\tTARGETS nvshmem nvshmem_host nvshmem-info', '\t# replaced ...\n\tTARGETS ${NVSHMEM_EFA_INSTALL_LIBS}');
    expect(staticLibInstallTail(patched)).toBe(' ${ACTIVE_BOOTSTRAPS} ${ACTIVE_TRANSPORTS}');
  });

  it('plans nothing for a tree without the library, or with two such lines (never guessed at)', () => {
    expect(staticLibInstallTail('install(\n\tTARGETS nvshmem_host nvshmem-info ${ACTIVE_TRANSPORTS}\n)\n')).toBeUndefined();
    expect(staticLibInstallTail(pristine + pristine)).toBeUndefined();
    // nvshmem-info2 is not nvshmem-info
    expect(staticLibInstallTail('install(\n  TARGETS nvshmem nvshmem_host nvshmem-info2\n)\n')).toBeUndefined();
  });
});
