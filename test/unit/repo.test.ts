import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import * as errors from '../../src/core/errors.ts';
import { TESTED_VERSIONS } from '../../src/core/nvshmem-tree.ts';
import { cli } from '../helpers/cli.ts';
import { deepEpSpecs } from '../../src/patchers/deepep/specs.ts';
import { nvshmemSpecs } from '../../src/patchers/nvshmem/index.ts';
import { loadTemplate } from '../../src/patchers/nvshmem/template.ts';

/** The repository says only true things about itself: scripts run, references resolve, the README is complete. */
const ROOT = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const README = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
/** The reference pages the README's index points to (the README itself stays a short front door). */
const doc = (name: string) => readFileSync(path.join(ROOT, 'docs', name), 'utf8');
const files = (dir: string): string[] =>
  readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? files(`${dir}/${e.name}`) : [`${dir}/${e.name}`]));

describe('repository hygiene', () => {
  it('every npm script names files that exist (npm run build works)', () => {
    const scripts: Record<string, string> = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')).scripts;
    expect(scripts.build, 'npm run build').toBeDefined();
    for (const [name, cmd] of Object.entries(scripts)) {
      const named = [...cmd.matchAll(/(?:-p|node|tsx)\s+([\w./-]+\.(?:json|mjs|js|ts))/g)].map((m) => m[1]!);
      for (const f of named) expect(existsSync(path.join(ROOT, f)), `script ${name}: ${f}`).toBe(true);
    }
  });

  it('no source file refers to a document that is not in the repository', () => {
    const written = new Set(['report.md', 'gda-signals.md']); // files the tool writes, not documents
    const dangling: string[] = [];
    for (const f of [...files('src'), ...files('bin'), ...files('scripts')]) {
      for (const m of readFileSync(path.join(ROOT, f), 'utf8').matchAll(/[\w./-]*\.md\b/g)) {
        const ref = m[0].replace(/^\/+/, '');
        if (written.has(path.basename(ref))) continue;
        if (!existsSync(path.join(ROOT, ref))) dangling.push(`${f}: ${ref}`);
      }
    }
    expect(dangling).toEqual([]);
  });

  it('every path of the layout (docs/contributing.md) exists', () => {
    const contributing = doc('contributing.md');
    const layout = contributing.slice(contributing.indexOf('## Layout'));
    const block = layout.slice(layout.indexOf('```') + 3, layout.indexOf('```', layout.indexOf('```') + 3));
    const paths = block.split('\n').flatMap((l) => l.trim().split(/\s+/)[0]?.split(',') ?? []).map((p) => p.trim()).filter((p) => /^[\w-]+\//.test(p) && !p.includes('<'));
    expect(paths.length).toBeGreaterThan(10);
    expect(paths.filter((p) => !existsSync(path.join(ROOT, p)))).toEqual([]);
  });

  it('the patch tables (docs/patches.md) list every patch id of both patchers', async () => {
    const t = await loadTemplate();
    const ids = [
      // With the combined static library's install line (NVSHMEM 3.4), so its two patches are listed too.
      ...nvshmemSpecs(t, [{ name: 'efa_io_defs.h', content: '', origin: 'x' }], 'single-rail', ' ${ACTIVE_TRANSPORTS}').map((s) => s.id),
      ...deepEpSpecs('v1', '').map((s) => s.id),
      ...deepEpSpecs('epv2', '').map((s) => s.id),
    ];
    const listed = [...doc('patches.md').matchAll(/^\| `([\w:*.-]+)`(?:, `([\w:*.-]+)`)? \|/gm)].flatMap((m) => [m[1]!, m[2]].filter((x): x is string => !!x));
    const covered = (id: string) => listed.some((l) => l === id || (l.endsWith('*') && id.startsWith(l.slice(0, -1))));
    expect([...new Set(ids)].filter((id) => !covered(id))).toEqual([]);
  });

  it('--help and docs/cli.md document every exit code an error (or a dry run with blockers) can carry', () => {
    const codes = new Set<number>([0]);
    for (const E of Object.values(errors)) {
      if (typeof E !== 'function' || !(E.prototype instanceof Error)) continue;
      const e = new (E as unknown as new (...a: unknown[]) => { exitCode?: number })('m', 'f', [], 'p', 'c');
      if (typeof e.exitCode === 'number') codes.add(e.exitCode);
    }
    // Not an error's: a dry run whose plan lists blockers (issue 39, item 5).
    codes.add(errors.DRY_RUN_WOULD_FAIL);
    expect([...codes].sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 130]);
    const help = cli(['--help']).stdout;
    const reference = doc('cli.md');
    const exitSection = reference.slice(reference.indexOf('### Exit codes'), reference.indexOf('### Environment variables'));
    for (const c of codes) {
      expect(help, `--help: exit ${c}`).toMatch(new RegExp(`^  ${c}\\s+\\S`, 'm'));
      expect(exitSection, `docs/cli.md: exit ${c}`).toContain(`\`${c}\``);
    }
  });

  it('the README states the NVSHMEM versions the patcher is tested on', () => {
    expect(README).toContain(`NVSHMEM ${TESTED_VERSIONS.text} from NVIDIA`);
  });
});
