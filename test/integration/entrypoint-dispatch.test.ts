import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { BIN, cli, ROOT, tmp } from '../helpers/cli.ts';

/**
 * Issue 39 item 8: `podman run IMAGE --help` (doctor, env, any nvshmem-efa command or option) answers at once
 * instead of first running the build; no command still builds, exports and starts bash. docker/entrypoint.sh
 * runs here with a stub nvshmem-efa (NVSHMEM_EFA_BIN) that logs each call, so no podman and no build are needed.
 */
const ENTRYPOINT = path.join(ROOT, 'docker/entrypoint.sh');

function stub() {
  const dir = tmp('nvshmem-efa-stub-');
  const log = path.join(dir, 'calls.log');
  const bin = path.join(dir, 'nvshmem-efa');
  // One line a call: its arguments, then the work dir it would default to. build succeeds, env exports a variable,
  // anything else answers and exits 5 (so that the exit status is seen to be the CLI's).
  writeFileSync(
    bin,
    `#!/bin/sh\necho "$* | NVSHMEM_EFA_WORK_DIR=$NVSHMEM_EFA_WORK_DIR" >> '${log}'\n` +
      `case "$1" in build) exit 0 ;; env) case " $* " in *" --keep-set "*) echo 'export FROM_ENV=1'; exit 0 ;; esac ;; esac\necho "stub answered: $*"\nexit 5\n`,
    { mode: 0o755 },
  );
  const calls = () => readFileSync(log, 'utf8').trimEnd().split('\n');
  return { bin, calls, work: path.join(dir, 'cache') };
}

function entrypoint(args: string[], env: NodeJS.ProcessEnv) {
  const r = spawnSync('bash', [ENTRYPOINT, ...args], { env: { PATH: process.env.PATH, ...env }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 30_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

describe('docker/entrypoint.sh passes nvshmem-efa commands through', () => {
  it.each([['--help'], ['--version'], ['doctor', '--json'], ['env'], ['report', '--work-dir', '/elsewhere']])('%s runs the CLI at once, without the build', (...args) => {
    const s = stub();
    const r = entrypoint(args, { NVSHMEM_EFA_BIN: s.bin, NVSHMEM_EFA_WORK_DIR: s.work });
    // Exactly one call, the command as given, with the entrypoint's work dir as the CLI's default.
    expect(s.calls()).toEqual([`${args.join(' ')} | NVSHMEM_EFA_WORK_DIR=${s.work}`]);
    expect(r.stdout).toBe(`stub answered: ${args.join(' ')}\n`);
    expect(r.code).toBe(5);
  });

  it('with no command it builds, exports the environment and starts bash, as before', () => {
    const s = stub();
    const r = entrypoint([], { NVSHMEM_EFA_BIN: s.bin, NVSHMEM_EFA_WORK_DIR: s.work, NVSHMEM_EFA_BUILD_ARGS: '--offline' });
    expect(r.code).toBe(0); // bash with no input ends at once
    expect(s.calls().map((c) => c.split(' | ')[0])).toEqual([`build --work-dir ${s.work} --offline`, `env --work-dir ${s.work} --keep-set`]);
  });

  it('another command (not the CLI\'s) still runs after the build, with its environment', () => {
    const s = stub();
    const r = entrypoint(['sh', '-c', 'echo "FROM_ENV=$FROM_ENV"; exit 3'], { NVSHMEM_EFA_BIN: s.bin, NVSHMEM_EFA_WORK_DIR: s.work, NVSHMEM_EFA_BUILD_ARGS: '--offline' });
    expect(r.stdout).toBe('FROM_ENV=1\n');
    expect(r.code).toBe(3);
    expect(s.calls()).toHaveLength(2);
  });

  it("the entrypoint's list of commands is the CLI's (a command added to the CLI is passed through too)", () => {
    const listed = /cli_commands=" ([a-z ]+) "/.exec(readFileSync(ENTRYPOINT, 'utf8'))?.[1]?.split(' ');
    const help = cli(['--help']).stdout;
    const commands = [...help.slice(help.indexOf('Commands:')).matchAll(/^ {2}([a-z]+)\b/gm)].map((m) => m[1]);
    expect(commands.length).toBeGreaterThan(5);
    expect(listed?.sort()).toEqual(commands.sort());
  });

  it('with the real CLI, `env` answers from NVSHMEM_EFA_WORK_DIR at once (no build there: exit 4 naming it)', () => {
    const work = path.join(tmp('nvshmem-efa-cache-'), 'nvshmem-efa');
    const r = entrypoint(['env'], { NVSHMEM_EFA_BIN: BIN, NVSHMEM_EFA_WORK_DIR: work, NO_COLOR: '1' });
    expect(r.stderr).toContain(`no report in ${work}`);
    expect(r.stderr).not.toContain('nvshmem-efa entrypoint:');
    expect(r.code).toBe(4);
  });
});
