import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/cli.ts';

/**
 * Every shell script passes shellcheck (the container and Slurm scripts at every severity, the others at
 * warning and error), and docker/Dockerfile passes a Dockerfile linter (dockerfilelint, a dev dependency) and
 * keeps its promises: pinned and verified downloads, no `curl | sh`, no secret, a non-root user, Node >= 20.
 * The image itself is built and run by test/container/image.test.ts (podman, stand-ins).
 */
const tracked = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' }).split('\n').filter(Boolean);
const shebang = (f: string) => {
  try {
    return /^#!.*\b(ba|da)?sh\b/.test(readFileSync(path.join(ROOT, f), 'utf8').split('\n', 1)[0]!);
  } catch {
    return false;
  }
};
const scripts = tracked.filter((f) => !f.startsWith('node_modules/') && (/\.(sh|sbatch)$/.test(f) || f === '.ci/run' || (!/\.\w+$/.test(f) && shebang(f))));
const ours = ['docker/entrypoint.sh', 'docker/nvshmem-efa', 'examples/slurm/deepep-tests.sbatch'];
const NO_SHELLCHECK = spawnSync('shellcheck', ['--version']).status === 0 ? undefined : 'no shellcheck (apt-get install shellcheck, or run .ci/run, which installs it)';
if (NO_SHELLCHECK) console.warn(`skipping shellcheck: ${NO_SHELLCHECK}`);

describe('shell scripts', () => {
  it('are found (the container and Slurm scripts among them)', () => {
    expect(scripts).toEqual(expect.arrayContaining([...ours, '.ci/run']));
  });

  it.skipIf(!!NO_SHELLCHECK)(`pass shellcheck${NO_SHELLCHECK ? ` [skipped: ${NO_SHELLCHECK}]` : ''}`, () => {
    const run = (files: string[], severity: string) => spawnSync('shellcheck', ['-S', severity, '-f', 'gcc', ...files], { cwd: ROOT, encoding: 'utf8' });
    const others = run(scripts.filter((f) => !ours.includes(f)), 'warning');
    expect(others.stdout, others.stdout).toBe('');
    const mine = run(ours, 'style');
    expect(mine.stdout, mine.stdout).toBe('');
    expect(mine.status).toBe(0);
  });
});

describe('docker/Dockerfile', () => {
  const text = readFileSync(path.join(ROOT, 'docker/Dockerfile'), 'utf8');

  it('passes dockerfilelint', () => {
    const r = spawnSync(process.execPath, [path.join(ROOT, 'node_modules/dockerfilelint/bin/dockerfilelint'), '-j', 'docker/Dockerfile'], { cwd: ROOT, encoding: 'utf8' });
    const issues = JSON.parse(r.stdout).files.flatMap((f: { issues: { line: number; title: string }[] }) => f.issues.map((i) => `${i.line}: ${i.title}`));
    expect(issues).toEqual([]);
  });

  it('pins and verifies what it downloads, pipes nothing into a shell, keeps no secret, runs as a user, has Node >= 20', () => {
    expect(text).not.toMatch(/\|\s*(ba)?sh\b/);
    // The EFA installer: its sha256 comes from the repository's lock, per version, never from the user.
    expect(text).not.toMatch(/ARG EFA_INSTALLER_SHA256/);
    const efa = JSON.parse(readFileSync(path.join(ROOT, 'third_party/efa-installer/lock.json'), 'utf8')).efaInstaller;
    expect(text).toContain(`ARG EFA_INSTALLER_VERSION=${efa.default}`);
    expect(efa.pins.find((p: { version: string }) => p.version === efa.default)?.sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(text).toMatch(/'\.efaInstaller\.pins\[\] \| select\(\.version == \$v\) \| \.sha256' \/pins\/efa-installer\/lock\.json/);
    expect(text).toMatch(/echo "\$\{sum\}  \/out\/aws-efa-installer\.tar\.gz" \| sha256sum -c -/);
    // GDRCopy: the archive sha256 of third_party/gdrcopy/lock.json; NVSHMEM and DeepEP: their pinned commits.
    expect(text).toMatch(/\.archive\.sha256" \/pins\/gdrcopy\/lock\.json/);
    expect(text).toMatch(/echo "\$\{sum\}  \/tmp\/gdrcopy\.tar\.gz" \| sha256sum -c -/);
    expect(text).toMatch(/test "\$\(git -C \/out rev-parse HEAD\)" = "\$\{NVSHMEM_COMMIT\}"/);
    expect(text).toMatch(/ARG NVSHMEM_COMMIT=131da55f643ac87c810ba0bc51d359258bf433a1/);
    expect(text).toMatch(/ARG DEEPEP_COMMIT=[0-9a-f]{40}/);
    expect(text).not.toMatch(/^(ARG|ENV)\s+\w*(TOKEN|SECRET|PASSWORD|ACCESS_KEY)/im);
    expect(text).toMatch(/^USER nvefa$/m);
    // Base images are arguments, each defaulting to a tagged image (dockerfilelint cannot tell; docker/.dockerfilelintrc).
    const bases = [...text.matchAll(/^ARG (\w+_IMAGE)=(\S+)$/gm)].map((m) => [m[1], m[2]] as const);
    expect(bases.map(([k]) => k).sort()).toEqual(['BASE_IMAGE', 'FETCH_IMAGE', 'NODE_IMAGE']);
    for (const [k, v] of bases) expect(v, k).toMatch(/^[\w./-]+:[\w.-]+$/);
    const node = /^ARG NODE_IMAGE=node:(\d+)\.(\d+)\.\d+/m.exec(text)!;
    expect(Number(node[1]) > 20 || (Number(node[1]) === 20 && Number(node[2]) >= 19)).toBe(true);
    // Every download is a named stage that --build-context can replace with a directory of the same shape.
    for (const stage of ['efa-installer', 'gdrcopy-src', 'nvshmem-src', 'efa-io-defs', 'deepep-src']) {
      expect(text).toMatch(new RegExp(`^FROM scratch AS ${stage}$`, 'm'));
      expect(text).toMatch(new RegExp(`^COPY --from=${stage} / `, 'm'));
    }
    // tini as process 1 (a command exec'd as process 1 would ignore docker stop's SIGTERM); the default target builds at start.
    expect(text).toMatch(/^ENTRYPOINT \["\/usr\/bin\/tini", "--", "\/usr\/local\/bin\/nvshmem-efa-entrypoint"\]$/m);
    expect(text.trimEnd().split('\n').pop()).toBe('FROM runtime AS start');
    // The efa_io_defs.h it bakes in is the one third_party/efa_gda/lock.json pins.
    const lock = JSON.parse(readFileSync(path.join(ROOT, 'third_party/efa_gda/lock.json'), 'utf8'));
    expect(text).toContain(`ARG EFA_IO_DEFS_URL=${lock.url}`);
    expect(text).toContain(`ARG EFA_IO_DEFS_SHA256=${lock.sha256}`);
  });

  it("copies into its tool stage every directory scripts/bundle.mjs --standalone reads (else: ENOENT at image build)", () => {
    const bundle = readFileSync(path.join(ROOT, 'scripts/bundle.mjs'), 'utf8');
    const list = /for \(const d of \[([^\]]+)\]\) cpSync/.exec(bundle);
    expect(list, 'the standalone copy list in scripts/bundle.mjs').not.toBeNull();
    const needed = [...list![1]!.matchAll(/'([^']+)'/g)].map((m) => m[1]!);
    expect(needed).toContain('native/efaemu'); // the scan found the list it guards
    const stage = text.slice(text.indexOf('AS tool'), text.indexOf('\nFROM ', text.indexOf('AS tool')));
    const copied = [...stage.matchAll(/^COPY (\S+) \.\/(\S+)$/gm)].filter((m) => m[1] === m[2]).map((m) => m[1]!);
    expect(needed.filter((d) => !copied.includes(d))).toEqual([]);
  });
});
