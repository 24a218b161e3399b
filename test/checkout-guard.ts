import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * A test writes only under its temporary directories (issue 39 item 9): what the run leaves in the checkout is a
 * failure. Global setup (after test/global-setup.ts bundled dist/, which is allowed) takes the new-path lines of
 * `git status --porcelain --ignored` (untracked `??` and ignored `!!` entries: a file, or a new folder as a whole);
 * its teardown takes them again and fails the run on any path that appeared. Edits to tracked files are not
 * looked at (a developer may edit while tests run). A new file inside a folder that was already there and
 * untracked or ignored (node_modules/) is not seen: git lists such a folder once.
 */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function newPaths(): Set<string> | undefined {
  const r = spawnSync('git', ['-C', ROOT, 'status', '--porcelain', '--ignored'], { encoding: 'utf8' });
  // Not a clone (an unpacked tarball) or no git: nothing to compare against, and the run says so.
  if (r.status !== 0) return undefined;
  return new Set(r.stdout.split('\n').filter((l) => l.startsWith('?? ') || l.startsWith('!! ')).map((l) => l.slice(3)));
}

export default function setup(): () => void {
  const before = newPaths();
  if (!before) process.stderr.write(`checkout guard: ${ROOT} is no git checkout; what the tests write there is not checked\n`);
  return () => {
    if (!before) return;
    const after = newPaths() ?? new Set();
    const appeared = [...after].filter((p) => !before.has(p));
    if (appeared.length) {
      // An error thrown here is printed but leaves vitest's exit status 0: the status is set as well.
      process.exitCode = 1;
      throw new Error(
        `the tests left ${appeared.length} new path(s) in the checkout: ${appeared.join(', ')}. A test writes under os.tmpdir() (or a cache ` +
          'outside the tree, test/helpers/build-cache.ts); find the test that wrote it and move the write there (if you created it yourself during the run, delete it and rerun)',
      );
    }
  };
}
