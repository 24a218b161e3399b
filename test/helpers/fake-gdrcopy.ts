import { chmodSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ROOT } from './cli.ts';

/**
 * A miniature GDRCopy project written by the test (never the real sources), shaped like NVIDIA/gdrcopy where
 * the build step cares: a top-level Makefile with the same variables (prefix, exec_prefix, libdir, includedir,
 * lowercase, and DESTDIR) whose `lib` target runs src/Makefile and whose `lib_install` installs
 * src/libgdrapi.so.<major>.<minor> with its soname and dev links into $(DESTDIR)$(libdir) and include/* into
 * $(DESTDIR)$(includedir). Without `prefix=` it installs into /usr/local, as the real one does, so a step that
 * passes the wrong variable (PREFIX) is caught by the staged install finding nothing under its prefix.
 */
function write(file: string, content: string, exec = false): void {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, content);
  if (exec) chmodSync(file, 0o755);
}

export function fakeGdrcopyTree(dir: string, o: { marker?: string } = {}): string {
  write(path.join(dir, 'Makefile'), `# miniature gdrcopy (test fixture)
prefix      ?= /usr/local
exec_prefix ?= $(prefix)
libdir      ?= $(exec_prefix)/lib
includedir  ?= $(prefix)/include

DESTDIR := $(abspath $(DESTDIR))
DESTLIB = $(DESTDIR)$(libdir)
DESTINC = $(DESTDIR)$(includedir)

MAJ := 2
MIN := 5

all: lib driver

driver:
\t@echo "the miniature has no kernel module" >&2; exit 1

lib:
\tcd src && $(MAKE) MAJ=$(MAJ) MIN=$(MIN)

lib_install: lib
\t@echo "installing in $(DESTLIB) $(DESTINC)..."
\tmkdir -p $(DESTLIB) $(DESTINC)
\tcp src/libgdrapi.so.$(MAJ).$(MIN) $(DESTLIB)/
\tcp include/* $(DESTINC)/
\tcd $(DESTLIB) && ln -sf libgdrapi.so.$(MAJ).$(MIN) libgdrapi.so.$(MAJ) && ln -sf libgdrapi.so.$(MAJ) libgdrapi.so

.PHONY: all driver lib lib_install
`);
  write(path.join(dir, 'src/Makefile'), `lib: libgdrapi.so.$(MAJ).$(MIN)

gdrapi.o: gdrapi.c ../include/gdrapi.h
\t$(CC) -O2 -fPIC -I ../include -c -o $@ gdrapi.c

libgdrapi.so.$(MAJ).$(MIN): gdrapi.o
\t$(CC) -shared -Wl,-soname,libgdrapi.so.$(MAJ) -o $@ gdrapi.o
\tln -sf libgdrapi.so.$(MAJ).$(MIN) libgdrapi.so.$(MAJ)
\tln -sf libgdrapi.so.$(MAJ) libgdrapi.so

.PHONY: lib
`);
  write(path.join(dir, 'include/gdrapi.h'), `#pragma once
#define GDR_API_MAJOR_VERSION 2
#define GDR_API_MINOR_VERSION 5
typedef struct gdr *gdr_t;
gdr_t gdr_open(void);
int gdr_close(gdr_t g);
`);
  write(path.join(dir, 'include/gdrconfig.h'), '#pragma once\n');
  write(path.join(dir, 'src/gdrapi.c'), `#include <stddef.h>
#include "gdrapi.h"
const char *fake_gdrapi_variant = "${o.marker ?? 'plain'}";
gdr_t gdr_open(void) { return NULL; }
int gdr_close(gdr_t g) { (void)g; return 0; }
`);
  write(path.join(dir, 'README.md'), 'miniature gdrcopy\n');
  return dir;
}

/** A lock like third_party/gdrcopy/lock.json whose archive is this test archive (served at `baseUrl`). */
export function gdrcopyLock(o: { sha256: string; baseUrl: string; commit?: string }): string {
  const real = JSON.parse(readFileSync(path.join(ROOT, 'third_party/gdrcopy/lock.json'), 'utf8'));
  const pin = real.gdrcopy.pins.find((p: { ref: string }) => p.ref === real.gdrcopy.default);
  const lock = {
    ...real,
    gdrcopy: { ...real.gdrcopy, pins: [{ ...pin, ...(o.commit ? { commit: o.commit } : {}), archive: { ...pin.archive, url: `${o.baseUrl}/${pin.archive.file}`, sha256: o.sha256 } }] },
  };
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-gdrcopy-lock-')), 'lock.json');
  writeFileSync(file, JSON.stringify(lock, null, 2));
  return file;
}

/**
 * A host root (NVSHMEM_EFA_SYSROOT) for doctor: `efa` adds an EFA device as the kernel shows one
 * (/sys/class/infiniband/rdmap0s6, its device's driver link naming efa); `dev` adds /dev/gdrdrv; `version` writes
 * /sys/module/gdrdrv/version (the gdrdrv module's MODULE_VERSION).
 */
export function gdrdrvSysroot(o: { efa: boolean; dev?: boolean; version?: string }): string {
  const root = mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-sysroot-'));
  mkdirSync(path.join(root, 'sys/class/infiniband'), { recursive: true });
  if (o.efa) {
    const dev = path.join(root, 'sys/devices/pci0000:00/0000:00:06.0');
    mkdirSync(path.join(dev, 'infiniband/rdmap0s6'), { recursive: true });
    mkdirSync(path.join(root, 'sys/bus/pci/drivers/efa'), { recursive: true });
    // As sysfs shows it: the class entry and the device's driver are links.
    link(path.join(root, 'sys/bus/pci/drivers/efa'), path.join(dev, 'driver'));
    link(path.join(dev, 'infiniband/rdmap0s6'), path.join(root, 'sys/class/infiniband/rdmap0s6'));
    link(dev, path.join(dev, 'infiniband/rdmap0s6/device'));
  }
  if (o.dev) write(path.join(root, 'dev/gdrdrv'), '');
  if (o.version) write(path.join(root, 'sys/module/gdrdrv/version'), `${o.version}\n`);
  return root;
}

function link(target: string, at: string): void {
  mkdirSync(path.dirname(at), { recursive: true });
  // Relative, as sysfs links are, so the sysroot can be moved.
  symlinkSync(path.relative(path.dirname(at), target), at);
}
