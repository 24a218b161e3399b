// The score of one Stryker JSON report (mutation-testing-report-schema): detected (killed, timeout) over the
// mutants a test could have caught (detected, survived, no coverage). Compile and runtime errors and ignored
// mutants are counted apart, as Stryker does.

/** @param {{ files: Record<string, { mutants: { status: string }[] }> }} report */
export function scoreOf(report) {
  const n = { Killed: 0, Timeout: 0, Survived: 0, NoCoverage: 0, CompileError: 0, RuntimeError: 0, Ignored: 0, Pending: 0 };
  for (const f of Object.values(report.files)) for (const m of f.mutants) n[m.status] = (n[m.status] ?? 0) + 1;
  const detected = n.Killed + n.Timeout;
  const valid = detected + n.Survived + n.NoCoverage;
  const score = valid === 0 ? NaN : (100 * detected) / valid;
  const line =
    `${valid === 0 ? 'n/a' : score.toFixed(1) + '%'}  killed ${n.Killed}, timeout ${n.Timeout}, survived ${n.Survived}, ` +
    `no coverage ${n.NoCoverage}, errors ${n.CompileError + n.RuntimeError}, ignored ${n.Ignored}`;
  return { score, counts: n, line };
}

/**
 * One line per mutant no test caught (survived or not covered): `file:line:col mutator: replacement`, in file
 * order. What docs/mutation.md lists with the reason each is left.
 */
export function survivorsOf(report) {
  const out = [];
  for (const [file, f] of Object.entries(report.files).sort(([a], [b]) => a.localeCompare(b))) {
    const left = f.mutants.filter((m) => m.status === 'Survived' || m.status === 'NoCoverage');
    left.sort((a, b) => a.location.start.line - b.location.start.line || a.location.start.column - b.location.start.column);
    for (const m of left) {
      const r = (m.replacement ?? '').replace(/\s+/g, ' ');
      out.push(`${file}:${m.location.start.line}:${m.location.start.column} ${m.status === 'NoCoverage' ? '[no coverage] ' : ''}${m.mutatorName}: ${r.length > 80 ? r.slice(0, 80) + '…' : r}`);
    }
  }
  return out;
}
