import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

/**
 * What the host has of the EFA user-space stack, read from files only (fast, no commands): the EFA
 * installer's record and rdma-core's libefa. `sysroot` prefixes every path (tests; NVSHMEM_EFA_SYSROOT).
 */
export interface EfaInstaller {
  /** /opt/amazon/efa (under the sysroot). */
  dir: string;
  /** From the first line of /opt/amazon/efa_installed_packages ("# EFA installer version: 1.43.2"). */
  version?: string;
  /** The rdma-core and libfabric-aws packages it installed, as listed there. */
  rdmaCore?: string;
  libfabricAws?: string;
}

export function detectEfaInstaller(sysroot = '/'): EfaInstaller | undefined {
  const dir = path.join(sysroot, 'opt/amazon/efa');
  const record = path.join(sysroot, 'opt/amazon/efa_installed_packages');
  if (!existsSync(dir) && !existsSync(record)) return undefined;
  const out: EfaInstaller = { dir };
  let text = '';
  try {
    text = readFileSync(record, 'utf8');
  } catch {
    return out;
  }
  const v = /^#\s*EFA installer version:\s*(\S+)/im.exec(text)?.[1];
  if (v) out.version = v;
  const pkgs = text.split(/\s+/).filter((w) => w && !w.startsWith('#'));
  // deb: rdma-core_60.0-1_amd64(.deb); rpm: rdma-core-60.0-1.amzn2023.x86_64
  const rdma = pkgs.map((p) => /^rdma-core[_-](\d+\.\d+)/.exec(p)?.[1]).find(Boolean);
  if (rdma) out.rdmaCore = rdma;
  const lf = pkgs.map((p) => /^libfabric-aws[_-](\d+\.\d+\.\d+(?:amzn[\d.]+?)?)(?=[_-]|$)/.exec(p)?.[1]).find(Boolean);
  if (lf) out.libfabricAws = lf;
  return out;
}

export interface HostRdmaCore {
  /** rdma-core release of the installed libefa (libefa.so.1.<abi>.<release>), e.g. "44.0". */
  version?: string;
  libefa?: string;
  /** infiniband/efadv.h, when the development files are installed. */
  header?: string;
  /** Its prefix (the folder holding include/infiniband/efadv.h). */
  prefix?: string;
  /** efadv.h declares efadv_query_qp_wqs and efadv_query_cq (what libfabric's GDA ops call). */
  gdaApi: boolean;
}

const LIB_DIRS = ['usr/lib/x86_64-linux-gnu', 'usr/lib/aarch64-linux-gnu', 'usr/lib64', 'usr/lib', 'usr/local/lib', 'usr/local/lib64'];
const PREFIXES = ['usr', 'usr/local'];

export function detectRdmaCore(sysroot = '/'): HostRdmaCore {
  const out: HostRdmaCore = { gdaApi: false };
  for (const d of LIB_DIRS) {
    const dir = path.join(sysroot, d);
    let names: string[];
    try {
      names = readdirSync(dir);
    } catch {
      continue;
    }
    const best = names
      .map((n) => ({ n, m: /^libefa\.so\.1\.\d+\.(\d+)\.(\d+)$/.exec(n) }))
      .filter((x) => x.m)
      .sort((a, b) => Number(b.m![1]) - Number(a.m![1]) || Number(b.m![2]) - Number(a.m![2]))[0];
    if (best) {
      out.version = `${best.m![1]}.${best.m![2]}`;
      out.libefa = path.join(dir, best.n);
      break;
    }
  }
  for (const p of PREFIXES) {
    const h = path.join(sysroot, p, 'include/infiniband/efadv.h');
    if (!existsSync(h)) continue;
    out.header = h;
    out.prefix = path.join(sysroot, p);
    const src = readFileSync(h, 'utf8');
    out.gdaApi = /\befadv_query_qp_wqs\s*\(/.test(src) && /\befadv_query_cq\s*\(/.test(src);
    break;
  }
  return out;
}
