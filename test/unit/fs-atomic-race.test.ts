import { mkdtempSync, readFileSync } from 'node:fs';
import * as fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { openFresh, openFreshSync } from '../../src/core/fs-atomic.ts';

/**
 * openFresh's answer to a file put back between its unlink and its exclusive open (EEXIST): unlink again, a few
 * times, then raise. The race cannot be timed from a test, so the open fails with EEXIST on demand here.
 */
const eexist = { left: 0 };
const opened = { n: 0 };
const fail = () => Object.assign(new Error('EEXIST: file already exists (test)'), { code: 'EEXIST' });

vi.mock('node:fs/promises', async (orig) => {
  const real = await orig<typeof import('node:fs/promises')>();
  const open: typeof real.open = async (...a: Parameters<typeof real.open>) => {
    opened.n++;
    if (eexist.left > 0) {
      eexist.left--;
      throw fail();
    }
    return real.open(...a);
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
    return real.openSync(...a);
  };
  return { ...real, openSync, default: { ...real, openSync } };
});

afterEach(() => {
  eexist.left = 0;
  opened.n = 0;
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
