import path from 'node:path';
import { detectEfaInstaller, detectRdmaCore, type EfaInstaller, type HostRdmaCore } from './fabric-host.ts';
import { fabricPin, versionAtLeastStr, type FabricLock } from './fabric-lock.ts';

/**
 * Which libfabric the build uses, and whether nvshmem-efa builds it (and the rdma-core under it) from pinned
 * sources. EFA GDA needs libfabric >= 2.3.0 built against rdma-core >= 59; Debian and Ubuntu ship 1.17 / 50.
 */
export type LibfabricChoice =
  | { action: 'use'; home: string; version: string; why: string }
  | { action: 'build'; ref: string; version: string; why: string };

export type RdmaCoreChoice =
  | { action: 'use'; version?: string; prefix?: string; why: string }
  | { action: 'build'; ref: string; version: string; why: string };

export interface FabricPlan {
  libfabric: LibfabricChoice;
  /** Only when libfabric is built: the rdma-core it is built against. */
  rdmaCore?: RdmaCoreChoice;
  efaInstaller?: EfaInstaller;
}

export interface FoundLibfabric {
  home: string;
  version: string;
  gda: { available: boolean; reason: string };
}

export interface PlanInput {
  /** --libfabric-home, or LIBFABRIC_HOME: the user's choice, used as it is. */
  explicitHome?: string;
  explicitFrom?: string;
  /** --libfabric-ref: build this pin. */
  ref?: string;
  /** The libfabric found by looking in the usual places (first with fabric.h), if any. */
  found?: FoundLibfabric;
  lock: FabricLock;
  sysroot?: string;
  /** For tests: what detectRdmaCore would say. */
  hostRdmaCore?: HostRdmaCore;
}

/** Where the work dir's libfabric and rdma-core are installed. */
export const fabricPrefixes = (workDir: string) => ({
  libfabric: path.join(workDir, 'install', 'libfabric'),
  rdmaCore: path.join(workDir, 'install', 'rdma-core'),
});

export function planFabric(input: PlanInput): FabricPlan {
  const efaInstaller = detectEfaInstaller(input.sysroot);
  const withInstaller = (p: Omit<FabricPlan, 'efaInstaller'>): FabricPlan => ({ ...p, ...(efaInstaller ? { efaInstaller } : {}) });
  if (input.ref) {
    const pin = fabricPin(input.lock, 'libfabric', input.ref);
    return withInstaller({ libfabric: { action: 'build', ref: pin.ref, version: pin.version, why: `--libfabric-ref ${input.ref}` }, rdmaCore: planRdmaCore(input) });
  }
  if (input.explicitHome) {
    const f = input.found;
    return withInstaller({ libfabric: { action: 'use', home: input.explicitHome, version: f?.version ?? 'unknown', why: `from ${input.explicitFrom ?? '--libfabric-home'}` } });
  }
  const f = input.found;
  if (f?.gda.available) {
    const installer = efaInstaller && path.resolve(f.home) === path.resolve(efaInstaller.dir) ? `the EFA installer${efaInstaller.version ? ` ${efaInstaller.version}` : ''}'s libfabric suffices: ` : '';
    return withInstaller({ libfabric: { action: 'use', home: f.home, version: f.version, why: `${installer}${f.gda.reason}` } });
  }
  const pin = fabricPin(input.lock, 'libfabric');
  const lacking = f
    ? `the libfabric found (${f.version} at ${f.home}${efaInstaller && path.resolve(f.home) === path.resolve(efaInstaller.dir) ? `, EFA installer ${efaInstaller.version ?? 'of unknown version'}` : ''}) cannot do EFA GDA: ${f.gda.reason}`
    : 'no libfabric found (include/rdma/fabric.h in LIBFABRIC_HOME, /opt/amazon/efa, /usr/local/libfabric, pkg-config, /usr)';
  return withInstaller({ libfabric: { action: 'build', ref: pin.ref, version: pin.version, why: lacking }, rdmaCore: planRdmaCore(input) });
}

function planRdmaCore(input: PlanInput): RdmaCoreChoice {
  const host = input.hostRdmaCore ?? detectRdmaCore(input.sysroot);
  const min = input.lock.rdmaCore.minimum;
  const pin = fabricPin(input.lock, 'rdma-core');
  const build = (why: string): RdmaCoreChoice => ({ action: 'build', ref: pin.ref, version: pin.version, why });
  if (!host.version && !host.header) return build(`no rdma-core on this host (no libefa.so.1, no infiniband/efadv.h); libfabric's EFA provider needs rdma-core >= ${min}`);
  if (host.version && !versionAtLeastStr(host.version, min)) return build(`the host's rdma-core ${host.version} is older than ${min}, whose efadv_query_qp_wqs / efadv_query_cq libfabric's GDA ops call`);
  if (!host.header) return build(`the host has rdma-core ${host.version} but not its development files (infiniband/efadv.h); install libibverbs-dev / rdma-core-devel to use it instead`);
  if (!host.gdaApi) return build(`${host.header} does not declare efadv_query_qp_wqs and efadv_query_cq (rdma-core < ${min})`);
  return { action: 'use', ...(host.version ? { version: host.version } : {}), ...(host.prefix ? { prefix: host.prefix } : {}), why: `the host's rdma-core ${host.version ?? ''} (${host.header}) declares efadv_query_qp_wqs and efadv_query_cq` };
}
