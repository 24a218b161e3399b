import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { CommandFailedError } from '../../src/core/errors.ts';
import { openLog, run, SHOWN_LINE_MAX } from '../../src/core/exec.ts';

/**
 * run(), the one way the tool starts a command (issue 36, classes 6 and 7): terminal output bounded per line while
 * the log keeps every byte, the command's exit (not its pipe's end) ending the wait, a command that went quiet
 * stopped. Each case failed on the run() before these bounds: the line came back whole, the wait outlived the test.
 */
const tmp = mkdtempSync(path.join(os.tmpdir(), 'nvshmem-efa-exec-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

async function withLog<T>(name: string, body: (log: Awaited<ReturnType<typeof openLog>>, logPath: string) => Promise<T>): Promise<T> {
  const logPath = path.join(tmp, name);
  const log = await openLog(logPath);
  try {
    return await body(log, logPath);
  } finally {
    await log.end();
  }
}

describe('run(): bounds on output and on waiting', () => {
  it('cuts a 5 MB line for the terminal and keeps it whole in the log', async () => {
    const shown: string[] = [];
    const lines = await withLog('long.log', (log, logPath) =>
      run(process.execPath, ['-e', "process.stdout.write('x'.repeat(5e6) + '\\nshort\\n')"], { log, logPath, fix: 'none', onLine: (l) => shown.push(l) }),
    );
    expect(lines[0]!.length).toBeLessThan(SHOWN_LINE_MAX + 100);
    expect(lines[0]).toMatch(/^x+… \(4995904 more characters in the log\)$/);
    expect(shown).toEqual(lines);
    expect(lines[1]).toBe('short');
    const logged = readFileSync(path.join(tmp, 'long.log'), 'utf8').split('\n');
    expect(logged[1]).toBe('x'.repeat(5e6));
  });

  it('a line that never ends is written to the log as it comes, and cut for the terminal', async () => {
    const err = await withLog('endless.log', (log, logPath) =>
      run(process.execPath, ['-e', "process.stdout.write('y'.repeat(3e6), () => process.exit(3))"], { log, logPath, fix: 'read the log' }),
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CommandFailedError);
    const tail = (err as CommandFailedError).tail;
    expect(tail).toHaveLength(1);
    expect(tail[0]).toMatch(/^y{4096}… \(2995904 more characters in the log\)$/);
    expect(readFileSync(path.join(tmp, 'endless.log'), 'utf8')).toContain('y'.repeat(3e6));
  });

  it('ends when the command exits, though a child it left in the background holds the output pipe', async () => {
    const t0 = Date.now();
    const lines = await withLog('bg.log', (log, logPath) => run('sh', ['-c', 'sleep 30 & echo $! > "$0"; echo started', path.join(tmp, 'bg.pid')], { log, logPath, fix: 'none' }));
    const ms = Date.now() - t0;
    process.kill(Number(readFileSync(path.join(tmp, 'bg.pid'), 'utf8')), 'SIGKILL');
    expect(lines).toEqual(['started']);
    expect(ms).toBeLessThan(15_000);
  }, 40_000);

  it('stops a command that printed nothing for its quiet limit, and says so', async () => {
    const t0 = Date.now();
    const err = await withLog('quiet.log', (log, logPath) =>
      run('sh', ['-c', 'echo cloning; exec sleep 30'], { log, logPath, fix: 'check the server', quietLimitMs: 1500 }),
    ).catch((e: unknown) => e);
    expect(Date.now() - t0).toBeLessThan(15_000);
    expect(err).toBeInstanceOf(CommandFailedError);
    expect((err as Error).message).toBe('sh printed nothing for 2 s and was stopped');
    expect(readFileSync(path.join(tmp, 'quiet.log'), 'utf8')).toMatch(/cloning\n\[stopped: sh printed nothing for 2 s\]/);
  }, 40_000);

  it('a command that cannot start fails at once', async () => {
    const err = await run(path.join(tmp, 'no-such-tool'), [], { fix: 'install it' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CommandFailedError);
    expect((err as Error).message).toMatch(/^no-such-tool failed \(.*ENOENT/);
  });
});
