// `nvshmem-efa launch` (issue 23): N ranks bootstrapped by NVSHMEM's default PMI-1, served by core/simple-pmi.ts,
// tested against a C client written for these tests that speaks the client side as NVSHMEM's simple PMI does
// (test/fixtures/pmi/pmi_client.c): allgathers by put / barrier / get, a missing key, finalize. A failing rank,
// a PMI abort and a hang each end the job with the right exit status instead of hanging it.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parsePmiLine } from '../../src/core/simple-pmi.ts';
import { cli, ROOT, tmp } from '../helpers/cli.ts';

const client = path.join(tmp('pmi-'), 'pmi_client');
execFileSync('gcc', ['-O1', '-o', client, path.join(ROOT, 'test/fixtures/pmi/pmi_client.c')]);
const env = (extra: Record<string, string> = {}) => ({ ...process.env, NO_COLOR: '1', ...extra });

describe('nvshmem-efa launch', () => {
  it('runs 3 ranks whose allgathers through the PMI key-value space and barriers see every rank, then finalize (exit 0)', () => {
    const r = cli(['launch', '-n', '3', '--', client, '4'], env());
    expect(r.code, r.stderr).toBe(0);
    for (let rank = 0; rank < 3; rank++) {
      for (let round = 0; round < 4; round++) {
        expect(r.stdout).toContain(`[${rank}] rank ${rank} round ${round} saw 00${String(round).padStart(2, '0')}== 01${String(round).padStart(2, '0')}== 02${String(round).padStart(2, '0')}==`);
      }
    }
    expect(r.stderr).toMatch(/^launch: 3 ranks finished: rank 0: exit 0/m);
  });

  it('--output-dir: one log per rank; --one-gpu-each gives each rank its own CUDA_VISIBLE_DEVICES', () => {
    const dir = path.join(tmp(), 'logs');
    const r = cli(['launch', '-n', '2', '--one-gpu-each', '--output-dir', dir, '--', 'sh', '-c', 'echo "gpu=$CUDA_VISIBLE_DEVICES rank=$PMI_RANK size=$PMI_SIZE"'], env());
    expect(r.code, r.stderr).toBe(0);
    expect(readFileSync(path.join(dir, 'rank0.log'), 'utf8')).toBe('gpu=0 rank=0 size=2\n');
    expect(readFileSync(path.join(dir, 'rank1.log'), 'utf8')).toBe('gpu=1 rank=1 size=2\n');
  });

  it('a rank that exits 3 while the others wait in a barrier: exit 3, the others stopped after --grace', () => {
    const t0 = Date.now();
    const r = cli(['launch', '-n', '3', '--grace', '1', '--', client], env({ PMI_CLIENT_FAIL: '1' }));
    expect(r.code, r.stderr).toBe(3);
    expect(r.stderr).toMatch(/error: launch: rank 1 exited with 3; rank 0: SIGTERM \(stopped\)/);
    expect(Date.now() - t0).toBeLessThan(20_000);
  });

  it('a PMI abort ends the job with its exit code; a hang ends at --timeout with 124', () => {
    const a = cli(['launch', '-n', '2', '--grace', '1', '--', client], env({ PMI_CLIENT_ABORT: '0' }));
    expect(a.code, a.stderr).toBe(7);
    expect(a.stderr).toContain('a rank called PMI abort (exit code 7)');
    const h = cli(['launch', '-n', '2', '--timeout', '2', '--', client], env({ PMI_CLIENT_HANG: '1' }));
    expect(h.code, h.stderr).toBe(124);
    expect(h.stderr).toMatch(/ran past --timeout 2s.*\nfix: raise --timeout/);
  });

  it('--dry-run prints each rank\'s environment and command; bad values are exit 2 with the fix', () => {
    const d = cli(['launch', '-n', '2', '--one-gpu-each', '--dry-run', '--', client, 'a b'], env());
    expect(d.code, d.stderr).toBe(0);
    expect(d.stdout.trim().split('\n')).toEqual([
      `PMI_PORT=127.0.0.1:<port> PMI_RANK=0 PMI_SIZE=2 CUDA_VISIBLE_DEVICES=0 ${client} 'a b'`,
      `PMI_PORT=127.0.0.1:<port> PMI_RANK=1 PMI_SIZE=2 CUDA_VISIBLE_DEVICES=1 ${client} 'a b'`,
    ]);
    for (const bad of [['-n', '0'], ['-n', 'two'], ['-n', '2', '--timeout', '-1']]) {
      const r = cli(['launch', ...bad, '--', client], env());
      expect(r.code, bad.join(' ')).toBe(2);
      expect(r.stderr).toMatch(/fix: /);
    }
  });

  it('--json: each rank\'s exit status and time on stdout, their output on stderr', () => {
    const r = cli(['launch', '-n', '2', '--json', '--', client, '1'], env());
    expect(r.code, r.stderr).toBe(0);
    const doc = JSON.parse(r.stdout) as { code: number; ranks: { rank: number; code: number; stopped: boolean }[]; pmi: { kind: string }; timedOut: boolean };
    expect(doc.code).toBe(0);
    expect(doc.ranks.map((x) => [x.rank, x.code, x.stopped])).toEqual([[0, 0, false], [1, 0, false]]);
    expect(doc.pmi.kind).toBe('finalized');
    expect(doc.timedOut).toBe(false);
    expect(r.stderr).toContain('[1] rank 1 round 0 saw 0000== 0100==');
  });

  it('parses words at their first = (base64 values end in =)', () => {
    expect(parsePmiLine('cmd=put kvsname=k key=BOOTSTRAP-0001 value=QUJD==\n')).toEqual({ cmd: 'put', kvsname: 'k', key: 'BOOTSTRAP-0001', value: 'QUJD==' });
    expect(() => parsePmiLine('cmd=get garbage')).toThrow(/not key=value/);
  });
});
