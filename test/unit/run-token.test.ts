import { spawn } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { carriesProof, proofOf, runToken, TOKEN_VAR } from '../../src/core/run-token.ts';

/**
 * Issue 36, class 4: a process proves it was started by a run only through the secret in its environment, and a
 * proof holds only for the work dir and holder it was made for (a proof copied into another lock proves nothing).
 */
const started: number[] = [];
afterEach(() => {
  for (const p of started.splice(0)) process.kill(p, 'SIGKILL');
});

async function sleeper(env: NodeJS.ProcessEnv): Promise<number> {
  const c = spawn('sleep', ['30'], { env, stdio: 'ignore' });
  started.push(c.pid!);
  // /proc/<pid>/environ is the new program's once it has exec'd.
  await new Promise((r) => c.once('spawn', r));
  return c.pid!;
}

const scope = { workDir: '64768:1234', pid: 4242, procStart: '99' };

describe('run token (lock take-over proof)', () => {
  it("a process started with the run's secret proves the lock's proof; one without it, or under another lock, does not", async () => {
    const proof = proofOf(runToken(), scope);
    const ours = await sleeper({ ...process.env, [TOKEN_VAR]: runToken() });
    const other = await sleeper({ ...process.env, [TOKEN_VAR]: 'f'.repeat(64) });
    const none = await sleeper({ PATH: process.env.PATH });
    expect(carriesProof(ours, proof, scope)).toBe(true);
    expect(carriesProof(other, proof, scope)).toBe(false);
    expect(carriesProof(none, proof, scope)).toBe(false);
    // The same secret under another work dir, or another holder: the proof of this lock does not carry over.
    expect(carriesProof(ours, proof, { ...scope, workDir: '64768:1235' })).toBe(false);
    expect(carriesProof(ours, proof, { ...scope, pid: 4243 })).toBe(false);
    expect(carriesProof(ours, 'not a hash', scope)).toBe(false);
    expect(carriesProof(999_999_999, proof, scope)).toBe(false);
  });

  it('the secret is 32 random bytes, the same for the whole run', () => {
    expect(runToken()).toMatch(/^[0-9a-f]{64}$/);
    expect(runToken()).toBe(runToken());
  });
});
