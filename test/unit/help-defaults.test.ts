import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { GDRCOPY_PREFIXES } from '../../src/core/gdrcopy-prefixes.ts';
import { DEEPEP_GDA_PATHS, DEFAULT_DEEPEP_GDA } from '../../src/options.ts';
import { DEEPEP_PINS } from '../../src/pins.ts';
import { cli, ROOT } from '../helpers/cli.ts';

/** Issue 20, item 11: `--help`, the README's options table and the code say the same defaults. */
const help = cli(['build', '--help']).stdout.replace(/\s+/g, ' ');
const readme = readFileSync(path.join(ROOT, 'docs', 'cli.md'), 'utf8'); // the options table lives in the CLI reference
/** The README options-table row whose first cell names `flag`. */
const row = (flag: string) => readme.split('\n').find((l) => l.startsWith('| ') && l.split('|')[1]!.includes(`\`${flag}`))!;
/** The --help text of one option, up to the next option. */
const helpOf = (flag: string) => new RegExp(`${flag} <\\w+> (.*?)(?= --[a-z]|$)`).exec(help)?.[1] ?? '';

describe('--help and docs/cli.md agree with the code on defaults', () => {
  it('--gdrcopy-home: GDRCOPY_HOME, then every prefix the code looks in, in order', () => {
    // Each name whole (/usr/local is not /usr/local/gdrdrv), in the code's order.
    const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
    const inOrder = new RegExp(['GDRCOPY_HOME', ...GDRCOPY_PREFIXES].map((p) => `${esc(p)}(?![\\w/])`).join('.*?'));
    for (const text of [helpOf('--gdrcopy-home'), row('--gdrcopy-home')]) expect(text).toMatch(inOrder);
  });

  it("--deepep-gda: both name every path and the code's default as the default", () => {
    for (const text of [helpOf('--deepep-gda'), row('--deepep-gda')]) {
      for (const p of DEEPEP_GDA_PATHS) expect(text).toContain(p);
      expect(text).toMatch(new RegExp(`\\b${DEFAULT_DEEPEP_GDA}\`? \\(the default\\)`));
    }
  });

  it('--deepep-ref: no default (DeepEP only when asked); both name the pinned commit', () => {
    for (const text of [helpOf('--deepep-ref'), row('--deepep-ref')]) {
      expect(text).toMatch(/no default/);
      for (const p of DEEPEP_PINS) expect(text).toContain(p.ref);
    }
  });
});
