import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { ROOT } from './cli.ts';
import { libfabricPrefix } from './host.ts';

/**
 * Miniature libfabric and rdma-core projects, shaped like the real ones where the build step cares, written
 * by the test (never the real sources): rdma-core is a CMake project that installs libefa, libibverbs and
 * infiniband/efadv.h (and, like the real one, wants to put a file in a system directory by absolute path);
 * libfabric is a release tarball with a `configure` that checks the EFA provider's prerequisites the way
 * prov/efa/configure.m4 does and writes config.h, or a checkout with only autogen.sh. The libfabric headers it
 * installs are the host's (Debian's 1.17) with the version set to the pinned one, plus our test
 * fi_ext_efa.h that declares FI_EFA_GDA_OPS: what the GDA transport compiles against.
 */
function write(file: string, content: string, exec = false): void {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, content);
  if (exec) chmodSync(file, 0o755);
}

/**
 * Makes `repo` a git repository (if it is not one yet), commits everything in it and points `tag` at that
 * commit (moving it if it exists): a mirror whose tag a test can pin, or move. Returns the commit.
 */
export function commitAndTag(repo: string, tag: string, message: string): string {
  const git = (...a: string[]) => execFileSync('git', ['-C', repo, ...a], { encoding: 'utf8' }).trim();
  if (!existsSync(path.join(repo, '.git'))) git('init', '-q');
  git('add', '-A');
  git('-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qm', message);
  git('tag', '-f', tag);
  return git('rev-parse', 'HEAD');
}

/** Marker a test can look for: the absolute-path file the fake rdma-core's install asks for. */
export const SYSTEM_FILE = '/etc/nvshmem-efa-test-fake-rdma-core.conf';

export function fakeRdmaCoreTree(dir: string, o: { version?: string; gdaApi?: boolean } = {}): string {
  const v = o.version ?? '60.1';
  write(path.join(dir, 'CMakeLists.txt'), `cmake_minimum_required(VERSION 3.18)
project(fake_rdma_core C)
include(GNUInstallDirs)
set(CMAKE_INSTALL_SYSTEMD_BINDIR "/lib/systemd" CACHE PATH "like rdma-core: an absolute default")
add_library(ibverbs SHARED verbs.c)
set_target_properties(ibverbs PROPERTIES VERSION 1.14.${v} SOVERSION 1)
add_library(efa SHARED efa.c)
target_link_libraries(efa ibverbs)
set_target_properties(efa PROPERTIES VERSION 1.4.${v} SOVERSION 1)
install(TARGETS ibverbs efa LIBRARY DESTINATION \${CMAKE_INSTALL_LIBDIR})
install(FILES efadv.h verbs.h DESTINATION \${CMAKE_INSTALL_INCLUDEDIR}/infiniband)
install(FILES efa.service DESTINATION \${CMAKE_INSTALL_SYSTEMD_BINDIR})
install(FILES system.conf DESTINATION ${path.dirname(SYSTEM_FILE)} RENAME ${path.basename(SYSTEM_FILE)})
`);
  write(path.join(dir, 'verbs.c'), 'int ibv_open_device(void) { return 0; }\n');
  write(path.join(dir, 'efa.c'), `int efadv_query_ah(void) { return 0; }\n${o.gdaApi === false ? '' : 'int efadv_query_qp_wqs(void *qp, void *wqs) { (void)qp; (void)wqs; return 0; }\nint efadv_query_cq(void *cq, void *attr) { (void)cq; (void)attr; return 0; }\n'}`);
  write(path.join(dir, 'verbs.h'), 'int ibv_open_device(void);\n');
  write(path.join(dir, 'efadv.h'), `int efadv_query_ah(void);\n${o.gdaApi === false ? '' : 'int efadv_query_qp_wqs(void *qp, void *wqs);\nint efadv_query_cq(void *cq, void *attr);\n#define EFADV_DEVICE_ATTR_CAPS_CQ_WITH_EXT_MEM_DMABUF (1 << 4)\nint efadv_create_cq(void);\n'}`);
  write(path.join(dir, 'efa.service'), '# fake\n');
  write(path.join(dir, 'system.conf'), '# fake\n');
  return dir;
}

const CONFIGURE = `#!/bin/sh
# The miniature's configure: the prerequisites prov/efa/configure.m4 checks, a config.h, a Makefile.
srcdir=$(cd "$(dirname "$0")" && pwd)
prefix=/usr/local; efa=no; cuda=no; only=no
for a in "$@"; do
  case "$a" in
    --prefix=*) prefix=\${a#--prefix=} ;;
    --enable-efa=*) efa=\${a#--enable-efa=} ;;
    --enable-only) only=yes ;;
    --with-cuda=*) cuda=\${a#--with-cuda=} ;;
    LDFLAGS=*) LDFLAGS=\${a#LDFLAGS=} ;;
    CPPFLAGS=*) CPPFLAGS=\${a#CPPFLAGS=} ;;
  esac
done
echo "checking for the efa provider in $efa"
[ "$efa" = yes ] && efa=/usr
h="$efa/include/infiniband/efadv.h"
if [ "$efa" = no ] || [ ! -f "$h" ]; then echo "configure: error: efa provider requested, but cannot be built (no $h)" >&2; exit 1; fi
def() { if grep -q "$2" "$h"; then echo "#define $1 1"; else echo "#define $1 0"; fi; }
{
  echo "#define HAVE_EFA 1"
  def HAVE_EFADV_QUERY_QP_WQS efadv_query_qp_wqs
  def HAVE_EFADV_QUERY_CQ efadv_query_cq
  if grep -q efadv_query_qp_wqs "$h" && grep -q efadv_query_cq "$h"; then echo "#define HAVE_EFA_DATA_PATH_DIRECT 1"; else echo "#define HAVE_EFA_DATA_PATH_DIRECT 0"; fi
  def HAVE_CAPS_CQ_WITH_EXT_MEM_DMABUF EFADV_DEVICE_ATTR_CAPS_CQ_WITH_EXT_MEM_DMABUF
  def HAVE_EFADV_CQ_EX efadv_create_cq
  if [ -f "$cuda/include/cuda.h" ]; then echo "#define HAVE_CUDA 1"; echo "#define HAVE_CUDA_DMABUF 1"; else echo "#define HAVE_CUDA 0"; fi
} > config.h
cat > Makefile <<EOF
all: libfabric.so.1
libfabric.so.1: $srcdir/src/fabric.c
	@echo "  CC       src/fabric.lo"
	cc -shared -fPIC -Wl,-soname,libfabric.so.1 -I$srcdir/include $CPPFLAGS -o libfabric.so.1 $srcdir/src/fabric.c $LDFLAGS -L$efa/lib -lefa
install: all
	mkdir -p \\$(DESTDIR)$prefix/lib \\$(DESTDIR)$prefix/include/rdma
	cp libfabric.so.1 \\$(DESTDIR)$prefix/lib/
	ln -sf libfabric.so.1 \\$(DESTDIR)$prefix/lib/libfabric.so
	cp $srcdir/include/rdma/*.h \\$(DESTDIR)$prefix/include/rdma/
EOF
echo "configure: efa provider yes (only=$only)"
`;

/** A libfabric-shaped source tree: `release` has configure, `checkout` only autogen.sh. */
export function fakeLibfabricTree(dir: string, o: { version?: string; layout?: 'release' | 'checkout'; marker?: string } = {}): string {
  const [ma, mi, re] = (o.version ?? '2.3.0').split('.');
  for (const f of readdirSync(path.join(libfabricPrefix!, 'include/rdma')).filter((n) => n === 'fabric.h' || n.startsWith('fi_'))) {
    let text = readFileSync(path.join(libfabricPrefix!, 'include/rdma', f), 'utf8');
    if (f === 'fabric.h') {
      text = text
        .replace(/#define FI_MAJOR_VERSION \d+/, `#define FI_MAJOR_VERSION ${ma}`)
        .replace(/#define FI_MINOR_VERSION \d+/, `#define FI_MINOR_VERSION ${mi}`)
        .replace(/#define FI_REVISION_VERSION \d+/, `#define FI_REVISION_VERSION ${re}`);
    }
    write(path.join(dir, 'include/rdma', f), text);
  }
  cpSync(path.join(ROOT, 'test/efa_abi/include/rdma/fi_ext_efa.h'), path.join(dir, 'include/rdma/fi_ext_efa.h'));
  // The entry points the probe and NVSHMEM call, answering like a host with no fabric at all.
  write(path.join(dir, 'src/fabric.c'), `#include <stdlib.h>
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
int efadv_query_ah(void);
int fi_getinfo(uint32_t v, const char *n, const char *s, uint64_t f, const struct fi_info *h, struct fi_info **i) {
    (void)v; (void)n; (void)s; (void)f; (void)h; *i = NULL; return efadv_query_ah() - FI_ENODATA;
}
void fi_freeinfo(struct fi_info *i) { (void)i; }
struct fi_info *fi_dupinfo(const struct fi_info *i) {
    /* fi_allocinfo() is fi_dupinfo(NULL): a zeroed info with every attribute allocated. */
    struct fi_info *n = calloc(1, sizeof *n);
    (void)i;
    n->tx_attr = calloc(1, sizeof *n->tx_attr);
    n->rx_attr = calloc(1, sizeof *n->rx_attr);
    n->ep_attr = calloc(1, sizeof *n->ep_attr);
    n->domain_attr = calloc(1, sizeof *n->domain_attr);
    n->fabric_attr = calloc(1, sizeof *n->fabric_attr);
    return n;
}
int fi_fabric(struct fi_fabric_attr *a, struct fid_fabric **f, void *c) { (void)a; (void)f; (void)c; return -FI_ENODATA; }
uint32_t fi_version(void) { return FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION); }
const char *fi_strerror(int e) { (void)e; return "fake libfabric"; }
const char *fake_libfabric_variant = "${o.marker ?? 'plain'}";
`);
  write(path.join(dir, 'configure.ac'), 'AC_INIT([fake libfabric], [' + (o.version ?? '2.3.0') + '])\n');
  if (o.layout === 'checkout') {
    // autogen.sh generates configure, as autoreconf does upstream.
    write(path.join(dir, 'configure.in.sh'), CONFIGURE);
    write(path.join(dir, 'autogen.sh'), '#!/bin/sh\nset -e\ncp configure.in.sh configure\nchmod +x configure\necho "autogen: configure generated"\n', true);
  } else {
    write(path.join(dir, 'configure'), CONFIGURE, true);
  }
  return dir;
}

/**
 * A fabtests-shaped release tree: a `configure` that wants --with-libfabric=DIR with DIR's rdma/fabric.h and
 * libfabric.so (as fabtests' configure.ac does), and a Makefile that builds fi_rdm_pingpong and fi_rma_bw as
 * programs linked against that libfabric (each prints its name, `marker` and the library's fi_version()),
 * installed into bin/ with a man page into share/.
 */
export function fakeFabtestsTree(dir: string, o: { marker?: string } = {}): string {
  write(path.join(dir, 'configure'), `#!/bin/sh
srcdir=$(cd "$(dirname "$0")" && pwd)
prefix=/usr/local; lf=
for a in "$@"; do
  case "$a" in
    --prefix=*) prefix=\${a#--prefix=} ;;
    --with-libfabric=*) lf=\${a#--with-libfabric=} ;;
    LDFLAGS=*) LDFLAGS=\${a#LDFLAGS=} ;;
  esac
done
if [ -z "$lf" ] || [ ! -f "$lf/include/rdma/fabric.h" ] || [ ! -e "$lf/lib/libfabric.so" ]; then echo "configure: error: libfabric not found in '$lf'" >&2; exit 1; fi
cat > Makefile <<EOF
all: fi_rdm_pingpong fi_rma_bw
fi_%: $srcdir/pingpong.c
\t@echo "  CC       \\$@"
\tcc -I$lf/include -DNAME=\\"\\$@\\" -o \\$@ $srcdir/pingpong.c -L$lf/lib -lfabric $LDFLAGS
install: all
\tmkdir -p \\$(DESTDIR)$prefix/bin \\$(DESTDIR)$prefix/share/man/man1
\tcp fi_rdm_pingpong fi_rma_bw \\$(DESTDIR)$prefix/bin/
\tcp $srcdir/fabtests.1 \\$(DESTDIR)$prefix/share/man/man1/
EOF
echo "configure: fabtests against $lf"
`, true);
  write(path.join(dir, 'pingpong.c'), `#include <stdio.h>
#include <rdma/fabric.h>
int main(void) { printf("%s (${o.marker ?? 'plain'}) on libfabric %u\\n", NAME, fi_version()); return 0; }
`);
  write(path.join(dir, 'fabtests.1'), '.TH FABTESTS 1\n');
  return dir;
}

/** `tar -cjf` / `-czf` of `dir` with one top-level folder named `top`; returns the archive and its sha256. */
export function tarball(dir: string, top: string, out: string): { file: string; sha256: string } {
  const stage = mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-tar-'));
  cpSync(dir, path.join(stage, top), { recursive: true, preserveTimestamps: true });
  execFileSync('tar', [out.endsWith('.bz2') ? '-cjf' : '-czf', out, '-C', stage, top]);
  return { file: out, sha256: createHash('sha256').update(readFileSync(out)).digest('hex') };
}

/** A lock like third_party/libfabric/lock.json whose archives are these test archives. */
export function fabricLock(o: { libfabric: { sha256: string; commit?: string }; rdmaCore: { sha256: string; commit?: string }; fabtests?: { sha256: string }; baseUrl: string }): string {
  const real = JSON.parse(readFileSync(path.join(ROOT, 'third_party/libfabric/lock.json'), 'utf8'));
  const { fabtests: realFabtests, ...lf } = real.libfabric.pins.find((p: { ref: string }) => p.ref === 'v2.3.0');
  const rc = real.rdmaCore.pins[0];
  // Without o.fabtests the pin names none (never the real archive: a test downloads nothing).
  const fabtests = o.fabtests ? { fabtests: { ...realFabtests, url: `${o.baseUrl}/fabtests-2.3.0.tar.bz2`, sha256: o.fabtests.sha256 } } : {};
  const lock = {
    ...real,
    libfabric: { default: 'v2.3.0', pins: [{ ...lf, ...fabtests, ...(o.libfabric.commit ? { commit: o.libfabric.commit } : {}), archive: { url: `${o.baseUrl}/libfabric-2.3.0.tar.bz2`, sha256: o.libfabric.sha256 } }] },
    rdmaCore: { ...real.rdmaCore, pins: [{ ...rc, ...(o.rdmaCore.commit ? { commit: o.rdmaCore.commit } : {}), archive: { url: `${o.baseUrl}/rdma-core-60.1.tar.gz`, sha256: o.rdmaCore.sha256 } }] },
  };
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-fabric-lock-')), 'lock.json');
  writeFileSync(file, JSON.stringify(lock, null, 2));
  return file;
}

/** Serves the files of `dir` on 127.0.0.1 (never the network) and counts the requests. */
export async function serveDir(dir: string): Promise<{ url: string; requests: string[]; close(): Promise<void> }> {
  const requests: string[] = [];
  const server = http.createServer((req, res) => {
    requests.push(req.url ?? '');
    try {
      const body = readFileSync(path.join(dir, path.basename(req.url ?? '')));
      res.writeHead(200, { 'content-length': body.length }).end(body);
    } catch {
      res.writeHead(404).end('not found');
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
