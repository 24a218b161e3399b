import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { obtainSource } from '../../src/core/fabric-source.ts';
import type { FabricPin } from '../../src/core/fabric-lock.ts';
import { applyClean, beginClaim, claimWorkDir, planClean, settleClaim } from '../../src/core/work-dir.ts';
import { fakeLibfabricTree, tarball } from '../helpers/fake-fabric.ts';

/**
 * Issue 20 item 2, in process: an archive is recorded as nvshmem-efa's when nvshmem-efa downloads it, so
 * `clean` removes that one and keeps the archives the user put beside it (or put in its place).
 */
const dir = (p = 'wd-') => mkdtempSync(path.join(os.tmpdir(), p));

function pinFor(sha256: string): FabricPin {
  return {
    ref: 'v2.3.0',
    version: '2.3.0',
    repository: 'https://example.invalid/libfabric',
    commit: '0'.repeat(40),
    archive: { url: 'https://example.invalid/libfabric-2.3.0.tar.bz2', sha256 },
    checksumFrom: 'test',
    note: 'test',
  };
}

async function download(work: string) {
  const archive = tarball(fakeLibfabricTree(dir('lf-')), 'libfabric-2.3.0', path.join(dir('arch-'), 'libfabric-2.3.0.tar.bz2'));
  const io = { downloads: path.join(work, 'downloads'), sources: path.join(work, 'sources'), offline: false, signal: new AbortController().signal, logPath: path.join(work, 'logs/x.log'), progress: () => {} };
  await obtainSource('libfabric', pinFor(archive.sha256), { kind: 'archive', url: archive.file }, io);
  settleClaim(work, { final: true });
}

describe('downloads are recorded when downloaded (issue 20 item 2)', () => {
  it('clean removes the archive nvshmem-efa downloaded and keeps the user\'s beside it', async () => {
    const work = dir();
    await claimWorkDir(work);
    await download(work);
    writeFileSync(path.join(work, 'downloads/mine.tar'), 'mine\n');
    const plan = (await planClean(work))!;
    expect(plan.remove).toContain(path.join(work, 'downloads/libfabric-2.3.0.tar.bz2'));
    expect(plan.keep).toEqual([path.join(work, 'downloads/mine.tar')]);
    await applyClean(work, plan);
    expect(readdirSync(work)).toEqual(['downloads']);
    expect(readdirSync(path.join(work, 'downloads'))).toEqual(['mine.tar']);
  });

  it('an archive the user put in place of the downloaded one (same name) is kept', async () => {
    const work = dir();
    await claimWorkDir(work);
    await download(work);
    const file = path.join(work, 'downloads/libfabric-2.3.0.tar.bz2');
    rmSync(file);
    writeFileSync(file, 'the user\'s copy\n');
    const plan = (await planClean(work))!;
    expect(plan.remove).not.toContain(file);
    expect(plan.notes.map((n) => n.path)).toContain(file);
    await applyClean(work, plan);
    expect(readFileSync(file, 'utf8')).toBe('the user\'s copy\n');
  });

  it('an archive the user put there before the run is used, and never becomes nvshmem-efa\'s', async () => {
    const work = dir();
    // An earlier run (it ended), then the user's archive, then this run.
    await claimWorkDir(work);
    settleClaim(work, { final: true });
    const archive = tarball(fakeLibfabricTree(dir('lf-')), 'libfabric-2.3.0', path.join(dir('arch-'), 'libfabric-2.3.0.tar.bz2'));
    mkdirSync(path.join(work, 'downloads'));
    writeFileSync(path.join(work, 'downloads/libfabric-2.3.0.tar.bz2'), readFileSync(archive.file));
    await claimWorkDir(work);
    beginClaim(work, () => {}); // what taking the lock does
    const io = { downloads: path.join(work, 'downloads'), sources: path.join(work, 'sources'), offline: true, signal: new AbortController().signal, logPath: path.join(work, 'logs/x.log'), progress: () => {} };
    await obtainSource('libfabric', pinFor(archive.sha256), { kind: 'archive', url: 'https://example.invalid/libfabric-2.3.0.tar.bz2' }, io);
    settleClaim(work, { final: true });
    const plan = (await planClean(work))!;
    expect(plan.keep).toEqual([path.join(work, 'downloads/libfabric-2.3.0.tar.bz2')]);
    expect(plan.remove).toContain(path.join(work, 'sources'));
  });
});
