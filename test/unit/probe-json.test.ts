import { describe, expect, it } from 'vitest';
import { probeJson } from '../../src/commands/probe.ts';
import { ProbeJsonSchema, type ProbeReport } from '../../src/core/probe-schema.ts';

// `probe --json` (issue 39, item 6): the verdict a value, by the rule doctor's follows; the probe's prose kept.
const report = (statuses: ProbeReport['checks'][number]['status'][]): ProbeReport => ({
  schema: 'nvshmem-efa-probe/1',
  host: 'h',
  root: '',
  checks: statuses.map((status, i) => ({ id: `c${i}`, title: `check ${i}`, status, evidence: 'seen', fix: status === 'pass' ? '' : 'do this' })),
  summary: { pass: statuses.filter((s) => s === 'pass').length, warn: statuses.filter((s) => s === 'warn').length, fail: statuses.filter((s) => s === 'fail').length, skip: statuses.filter((s) => s === 'skip').length },
  verdict: 'the probe says so',
});

describe('probe --json', () => {
  it('is schema nvshmem-efa-probe/2 with verdict ok, warn or fail, the prose as summary and the counts as counts', () => {
    for (const [statuses, verdict] of [[['pass', 'skip'], 'ok'], [['pass', 'warn', 'skip'], 'warn'], [['warn', 'fail', 'pass'], 'fail']] as const) {
      const doc = probeJson(report([...statuses]));
      expect(ProbeJsonSchema.parse(doc)).toEqual(doc);
      expect(doc.verdict, statuses.join()).toBe(verdict);
      expect(doc.summary).toBe('the probe says so');
      expect(doc.counts).toEqual(report([...statuses]).summary);
      expect(Object.keys(doc)[0]).toBe('schema');
      expect(doc.schema).toBe('nvshmem-efa-probe/2');
    }
  });
});
