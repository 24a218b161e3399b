import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_WORK_DIR, defaultWorkDir } from '../../src/core/work-dir-default.ts';
import { resolveOptions } from '../../src/options.ts';
import { cli, ENV, tmp } from '../helpers/cli.ts';

/**
 * Issue 39 item 8: NVSHMEM_EFA_WORK_DIR is the default --work-dir of every command that takes one, read by the CLI
 * itself (the container image and the Slurm scripts set it; `nvshmem-efa env` there must find their build), and
 * --work-dir still wins.
 */
const COMMANDS_WITH_WORK_DIR = ['build', 'patch', 'report', 'env', 'probe', 'bench', 'selftest', 'clean'];

describe('NVSHMEM_EFA_WORK_DIR', () => {
  it('is the default work dir when set and not empty; .nvshmem-efa otherwise', () => {
    expect(defaultWorkDir({ NVSHMEM_EFA_WORK_DIR: '/cache/w' })).toBe('/cache/w');
    expect(defaultWorkDir({})).toBe(DEFAULT_WORK_DIR);
    expect(defaultWorkDir({ NVSHMEM_EFA_WORK_DIR: '' })).toBe(DEFAULT_WORK_DIR);
  });

  it('resolveOptions takes it (relative to the cwd) unless --work-dir is given', () => {
    const env = { NVSHMEM_EFA_WORK_DIR: 'from-env' };
    expect(resolveOptions('report', {}, '/x', env).workDir).toBe(path.resolve('/x/from-env'));
    expect(resolveOptions('report', { workDir: 'given' }, '/x', env).workDir).toBe(path.resolve('/x/given'));
    expect(resolveOptions('report', {}, '/x', {}).workDir).toBe(path.resolve('/x/.nvshmem-efa'));
  });

  it('every command with --work-dir shows it as the default in --help', () => {
    const dir = tmp('nvshmem-efa-envwd-');
    for (const c of COMMANDS_WITH_WORK_DIR) {
      const help = cli([c, '--help'], { ...ENV, NVSHMEM_EFA_WORK_DIR: dir }).stdout.replace(/\s+/g, ' ');
      expect(help, c).toMatch(new RegExp(`--work-dir <dir> .*?NVSHMEM_EFA_WORK_DIR.*?\\(default: "${dir}"\\)`));
    }
  });

  it('the CLI reads it: report and env look in that dir, --work-dir still wins, the selftest dry run names it', () => {
    const dir = tmp('nvshmem-efa-envwd-');
    const other = tmp('nvshmem-efa-envwd-other-');
    const env = { ...ENV, NVSHMEM_EFA_WORK_DIR: dir };
    for (const c of ['report', 'env']) {
      const r = cli([c], env);
      expect(r.code, c).toBe(4);
      expect(r.stderr, c).toContain(`no report in ${dir}`);
      const w = cli([c, '--work-dir', other], env);
      expect(w.stderr, c).toContain(`no report in ${other}`);
      expect(w.stderr, c).not.toContain(dir);
    }
    // selftest and bench resolve the path themselves (not through resolveOptions): their dry runs name the dir.
    const s = cli(['selftest', '--dry-run', '--json'], env);
    expect(s.stdout + s.stderr).toContain(dir);
  });
});
