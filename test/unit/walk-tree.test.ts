import { mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { hashTree } from '../../src/core/hash.ts';
import { copyTree } from '../../src/core/copy-tree.ts';
import { fileDigests } from '../../src/core/file-digests.ts';
import { skipBuildDirs, skipDirsNamed, skipHiddenDirs, skipNamed, walkTree, walkTreeSync, type TreeEntry, type WalkOptions } from '../../src/core/walk-tree.ts';

function tree(files: Record<string, string>): string {
  const root = mkdtempSync(path.join(os.tmpdir(), 'walk-tree-'));
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
    writeFileSync(path.join(root, rel), text);
  }
  return root;
}

async function visited(root: string, opts: WalkOptions = {}, verdict: (e: TreeEntry) => 'skip' | 'stop' | void = () => {}): Promise<string[]> {
  const out: string[] = [];
  await walkTree(root, (e) => {
    out.push(`${e.type} ${e.rel}`);
    return verdict(e);
  }, opts);
  return out;
}

describe('walkTree', () => {
  it('visits a directory before what it holds, in name order when sorted', async () => {
    const root = tree({ 'b/y': '', 'b/x': '', a: '', 'c/d/e': '' });
    expect(await visited(root, { sorted: true })).toEqual(['file a', 'dir b', 'file b/x', 'file b/y', 'dir c', 'dir c/d', 'file c/d/e']);
  });

  it('named skip rules leave an entry out: not visited, a directory not walked', async () => {
    const root = tree({ '.git/HEAD': '', 'sub/.git': 'gitdir: x', 'build/o': '', 'x/build/o': '', 'y/CMakeCache.txt': '', 'y/k.c': '', '.hidden/f': '', 'a.c': '' });
    // skipDirsNamed leaves a file of that name (a worktree's .git file); skipNamed does not.
    expect(await visited(root, { sorted: true, skip: [skipDirsNamed('.git', 'build')] })).toEqual(['dir .hidden', 'file .hidden/f', 'file a.c', 'dir sub', 'file sub/.git', 'dir x', 'dir y', 'file y/CMakeCache.txt', 'file y/k.c']);
    expect(await visited(root, { sorted: true, skip: [skipNamed('.git'), skipBuildDirs, skipHiddenDirs] })).toEqual(['file a.c', 'dir sub', 'dir x', 'dir x/build', 'file x/build/o']);
  });

  it('a visit skips a directory or stops the walk; maxDepth and start bound it', async () => {
    const root = tree({ 'a/1/2/f': '', 'b/g': '', c: '' });
    expect(await visited(root, { sorted: true }, (e) => (e.name === 'a' ? 'skip' : undefined))).toEqual(['dir a', 'dir b', 'file b/g', 'file c']);
    expect(await visited(root, { sorted: true }, (e) => (e.name === 'g' ? 'stop' : undefined))).toEqual(['dir a', 'dir a/1', 'dir a/1/2', 'file a/1/2/f', 'dir b', 'file b/g']);
    expect(await visited(root, { sorted: true, maxDepth: 1 })).toEqual(['dir a', 'dir a/1', 'dir b', 'file b/g', 'file c']);
    expect(await visited(root, { sorted: true, start: 'a/1' })).toEqual(['dir a/1/2', 'file a/1/2/f']);
  });

  it('an unreadable directory fails the walk unless the caller handles it', async () => {
    const root = tree({ f: '' });
    await expect(visited(path.join(root, 'none'))).rejects.toThrow(/ENOENT/);
    const missing: string[] = [];
    expect(await visited(root, { start: 'none', onUnreadable: (rel) => missing.push(rel) })).toEqual([]);
    expect(missing).toEqual(['none']);
  });

  it('links are entries of their own unless followed; the sync walk sees them too', async () => {
    const root = tree({ 'a/f': '' });
    symlinkSync('a', path.join(root, 'l'));
    expect(await visited(root, { sorted: true })).toEqual(['dir a', 'file a/f', 'symlink l']);
    expect(await visited(root, { sorted: true, links: { follow: true, inside: root, refuse: () => new Error('no') } })).toEqual(['dir a', 'file a/f', 'dir l', 'file l/f']);
    const sync: string[] = [];
    walkTreeSync(root, (e) => void sync.push(`${e.type} ${e.rel}`), { sorted: true });
    expect(sync).toEqual(['dir a', 'file a/f', 'symlink l']);
  });

  it('followed links: a dangling one, one to a directory outside and a loop are refused through the caller', async () => {
    const refuse = (p: { kind: string }) => new Error(`refused ${p.kind}`);
    const elsewhere = tree({ g: '' });
    for (const [target, kind] of [['nowhere', 'dangling'], [elsewhere, 'outside'], ['..', 'loop']] as const) {
      const root = tree({ 'a/f': '' });
      symlinkSync(target, path.join(root, 'a', 'l'));
      await expect(visited(root, { links: { follow: true, inside: root, refuse } })).rejects.toThrow(`refused ${kind}`);
    }
  });
});

describe('the walk callers keep their own rules', () => {
  it('hashTree skips build/ at any depth and hashes a .git file; copyTree copies a nested build/ but no .git file', async () => {
    const root = tree({ 'x/build/f.c': 'v1', 'sub/.git': 'gitdir: x', 'a.c': '' });
    const h = await hashTree(root);
    writeFileSync(path.join(root, 'x/build/f.c'), 'v2');
    expect(await hashTree(root)).toBe(h);
    writeFileSync(path.join(root, 'sub/.git'), 'gitdir: y');
    expect(await hashTree(root)).not.toBe(h);
    const dst = path.join(mkdtempSync(path.join(os.tmpdir(), 'walk-copy-')), 'c');
    await copyTree(root, dst, []);
    expect(Object.keys(await fileDigests(dst)).sort()).toEqual(['a.c', 'x/build/f.c']);
  });
});
