import { existsSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import * as fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { openForAppend, openForAppendSync, openFresh, openFreshSync, writeFileAtomic } from '../../src/core/fs-atomic.ts';

/**
 * openFresh's answer to a file put back between its unlink and its exclusive open (EEXIST): unlink again, a few
 * times, then raise. The race cannot be timed from a test, so the open fails with EEXIST on demand here.
 */
const eexist = { left: 0 };
const opened = { n: 0 };
/** Codes the next opens fail with (after the EEXISTs), and a gate an async open waits at once the file is open. */
const other = { codes: [] as string[], gate: undefined as Promise<void> | undefined };
const fail = (code = 'EEXIST') => Object.assign(new Error(`${code}: (test)`), { code });

vi.mock('node:fs/promises', async (orig) => {
  const real = await orig<typeof import('node:fs/promises')>();
  const open: typeof real.open = async (...a: Parameters<typeof real.open>) => {
    opened.n++;
    if (eexist.left > 0) {
      eexist.left--;
      throw fail();
    }
    const code = other.codes.shift();
    if (code) throw fail(code);
    const fh = await real.open(...a);
    if (other.gate) await other.gate;
    return fh;
  };
  return { ...real, open, default: { ...real, open } };
});
vi.mock('node:fs', async (orig) => {
  const real = await orig<typeof import('node:fs')>();
  const openSync: typeof real.openSync = (...a: Parameters<typeof real.openSync>) => {
    opened.n++;
    if (eexist.left > 0) {
      eexist.left--;
      throw fail();
    }
    const code = other.codes.shift();
    if (code) throw fail(code);
    return real.openSync(...a);
  };
  return { ...real, openSync, default: { ...real, openSync } };
});

afterEach(() => {
  eexist.left = 0;
  opened.n = 0;
  other.codes = [];
  other.gate = undefined;
});

const tmp = () => mkdtempSync(path.join(os.tmpdir(), 'fs-race-'));

describe('openFresh against a file put back at its name', () => {
  it('unlinks and opens again, up to five opens in all, then raises EEXIST', async () => {
    const d = tmp();
    for (const [put, ok] of [[4, true], [5, false]] as const) {
      const f = path.join(d, `a${put}`);
      eexist.left = put;
      opened.n = 0;
      const got = await openFresh(f).then(
        async (fh) => {
          await fh.writeFile('x');
          await fh.close();
          return 'opened';
        },
        (e: NodeJS.ErrnoException) => e.code,
      );
      expect(got).toBe(ok ? 'opened' : 'EEXIST');
      expect(opened.n).toBe(5);
      if (ok) expect(readFileSync(f, 'utf8')).toBe('x');
    }
  });

  it('openFreshSync the same', () => {
    const d = tmp();
    for (const [put, ok] of [[4, true], [5, false]] as const) {
      eexist.left = put;
      opened.n = 0;
      let got: string;
      try {
        fs.closeSync(openFreshSync(path.join(d, `s${put}`)));
        got = 'opened';
      } catch (e) {
        got = (e as NodeJS.ErrnoException).code!;
      }
      expect(got).toBe(ok ? 'opened' : 'EEXIST');
      expect(opened.n).toBe(5);
    }
  });
});

const codeOf = async (p: Promise<unknown>) => ((await p.then(() => undefined, (e: unknown) => e)) as NodeJS.ErrnoException | undefined)?.code;
const codeOfSync = (f: () => unknown) => {
  try {
    f();
  } catch (e) {
    return (e as NodeJS.ErrnoException).code;
  }
  return undefined;
};

describe('errors of open other than a file put back', () => {
  it('openFresh and openFreshSync raise them at once', async () => {
    const d = tmp();
    other.codes = ['EACCES'];
    expect(await codeOf(openFresh(path.join(d, 'a')))).toBe('EACCES');
    expect(opened.n).toBe(1);
    other.codes = ['EACCES'];
    expect(codeOfSync(() => openFreshSync(path.join(d, 'b')))).toBe('EACCES');
    expect(opened.n).toBe(2);
    expect(readdirSync(d)).toEqual([]);
  });

  it('openForAppend and openForAppendSync raise them, never replacing the file', async () => {
    const d = tmp();
    const f = path.join(d, 'x.log');
    writeFileSync(f, 'kept\n');
    other.codes = ['EIO'];
    expect(await codeOf(openForAppend(f))).toBe('EIO');
    other.codes = ['EIO'];
    expect(codeOfSync(() => openForAppendSync(f))).toBe('EIO');
    expect(readFileSync(f, 'utf8')).toBe('kept\n');
  });

  it('writeFileAtomic raises the error of its temporary file, and leaves nothing', async () => {
    const d = tmp();
    const f = path.join(d, 'state.json');
    other.codes = ['EIO'];
    expect(await codeOf(writeFileAtomic(f, 'x'))).toBe('EIO');
    expect(readdirSync(d)).toEqual([]);
  });
});

describe('the exit handler of fs-atomic', () => {
  const handler = () => {
    const found = process.listeners('exit').filter((l) => l.toString().includes('inFlight'));
    expect(found).toHaveLength(1);
    return found[0] as () => void;
  };

  it('removes the temporary file of a write in flight, and nothing once the write is done', async () => {
    const d = tmp();
    const f = path.join(d, 'state.json');
    const tmpName = `${f}.nvshmem-efa-tmp-${process.pid}`;
    let open!: () => void;
    other.gate = new Promise((r) => (open = r));
    const write = writeFileAtomic(f, 'x').then(
      () => 'written',
      (e: NodeJS.ErrnoException) => e.code,
    );
    for (let i = 0; i < 200 && !existsSync(tmpName); i++) await new Promise((r) => setTimeout(r, 5));
    expect(existsSync(tmpName)).toBe(true);
    handler()();
    expect(existsSync(tmpName)).toBe(false);
    open();
    // Its temporary file gone, the write cannot rename it into place.
    expect(await write).toBe('ENOENT');
    other.gate = undefined;
    await writeFileAtomic(f, 'y');
    writeFileSync(tmpName, 'put there after the write');
    handler()();
    expect(readFileSync(tmpName, 'utf8')).toBe('put there after the write');
  });
});
