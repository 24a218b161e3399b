/**
 * A step's progress lines as a person reads them, on a terminal and in a CI log. A line that counts its work
 * ("[n/m] ...", as ninja and the fabric builds print it) gains the percentage, the time the step has run and an
 * estimate of what remains (linear in the work done: compile units are alike enough). On a terminal every line
 * shows; in a log (not live) a counted line shows once per 10% crossed, and any other line at most every `quietMs`,
 * so a long compile is ten lines, not one every five seconds.
 */
export interface ProgressOptions {
  live: boolean;
  quietMs?: number;
  now?: () => number;
}

const COUNTED = /^\[(\d+)\/(\d+)\]\s*/;

/** "1m 05s", "42s", "3.4s": short and fixed in form (tenths below 10 s, where a step's cost is often all there is). */
export function formatDuration(ms: number): string {
  if (ms < 9950) return `${(Math.max(0, ms) / 1000).toFixed(1)}s`;
  const s = Math.round(ms / 1000);
  return s >= 60 ? `${Math.floor(s / 60)}m ${String(s % 60).padStart(2, '0')}s` : `${s}s`;
}

export function progressReporter(show: (s: string) => void, o: ProgressOptions): (s: string) => void {
  const now = o.now ?? Date.now;
  const start = now();
  let lastPlain = -Infinity;
  let lastDecile = -1;
  return (s) => {
    const t = now();
    const m = COUNTED.exec(s);
    if (m) {
      const done = Number(m[1]);
      const total = Number(m[2]);
      if (total > 0) {
        const pct = Math.min(100, Math.floor((100 * done) / total));
        const decile = Math.floor(pct / 10);
        if (!o.live && decile <= lastDecile) return;
        lastDecile = decile;
        const elapsed = t - start;
        const eta = done > 0 && done < total ? `, about ${formatDuration((elapsed * (total - done)) / done)} left` : '';
        show(`${pct}% [${done}/${total}] ${formatDuration(elapsed)} elapsed${eta}: ${s.slice(m[0].length)}`);
        return;
      }
    }
    if (!o.live && t - lastPlain < (o.quietMs ?? 5000)) return;
    lastPlain = t;
    show(s);
  };
}
