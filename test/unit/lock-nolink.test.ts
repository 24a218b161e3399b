import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { WorkDirBusyError } from '../../src/core/errors.ts';
import { acquireLock, LOCK_FILE } from '../../src/core/lock.ts';

/**
 * The lock on a file system without hard links (link() fails EPERM, ENOTSUP or EOPNOTSUPP): created with O_EXCL
 * instead. Such a file system cannot be had in a test, so link() fails on demand here.
 */
const linkFails = { code: undefined as string | undefined, calls: 0 };
vi.mock('node:fs/promises', async (orig) => {
  const real = await orig<typeof import('node:fs/promises')>();
  const link: typeof real.link = async (...a: Parameters<typeof real.link>) => {
    linkFails.calls++;
    if (linkFails.code) throw Object.assign(new Error(`${linkFails.code}: link (test)`), { code: linkFails.code });
    return real.link(...a);
  };
  return { ...real, link, default: { ...real, link } };
});
afterEach(() => {
  linkFails.code = undefined;
  linkFails.calls = 0;
});

const tmp = () => mkdtempSync(path.join(os.tmpdir(), 'lock-nolink-'));

describe('work dir lock without hard links', () => {
  it('is created whole with O_EXCL, leaves no file of its own, and still refuses a second taker', async () => {
    for (const code of ['EPERM', 'ENOTSUP', 'EOPNOTSUPP']) {
      linkFails.code = code;
      linkFails.calls = 0;
      const d = tmp();
      const held = await acquireLock(d, ['node', 'cli', 'build']);
      expect(linkFails.calls).toBe(1);
      expect(readdirSync(d)).toEqual([LOCK_FILE]);
      expect(JSON.parse(readFileSync(path.join(d, LOCK_FILE), 'utf8'))).toMatchObject({ pid: process.pid, command: 'nvshmem-efa build' });
      await expect(acquireLock(d)).rejects.toBeInstanceOf(WorkDirBusyError);
      await held.release();
      expect(readdirSync(d)).toEqual([]);
    }
  });

  it('any other error of link() is raised, and nothing is left behind', async () => {
    linkFails.code = 'EIO';
    const d = tmp();
    const e = (await acquireLock(d).catch((x: unknown) => x)) as NodeJS.ErrnoException;
    expect(e.code).toBe('EIO');
    expect(readdirSync(d)).toEqual([]);
  });
});
