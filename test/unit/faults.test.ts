import { describe, expect, it } from 'vitest';
import { exitCodeOf, filesystemFault, FilesystemError, formatError } from '../../src/core/errors.ts';

const errno = (code: string, p?: string, syscall = 'open') => Object.assign(new Error(`${code}: something, ${syscall} '${p}'`), { code, ...(p ? { path: p } : {}), syscall });

describe('environment faults are errors, not bugs (item 8)', () => {
  it.each([
    ['ENOTDIR', /has a file where a directory is expected/, /is a regular file/],
    ['EEXIST', /already exists/, /move .* away/],
    ['EACCES', /permission denied/, /writable/],
    ['EPERM', /operation not permitted/, /another path/],
    ['EROFS', /read-only file system/, /writable location/],
    ['ENOSPC', /no space left on device/, /free space .*\(df -h/],
    ['EDQUOT', /quota/, /free space/],
    ['ENOENT', /does not exist/, /check the path/],
  ])('%s: a one-line message with the path, a fix and exit 6', (code, what, fix) => {
    const e = errno(code, '/work/x/logs');
    const f = filesystemFault(e)!;
    expect(f).toBeInstanceOf(FilesystemError);
    expect(f.message).toMatch(new RegExp(`^/work/x/logs: `));
    expect(f.message).toMatch(what);
    expect(f.fix).toMatch(fix);
    expect(exitCodeOf(e)).toBe(6);
    const text = formatError(e);
    expect(text).not.toMatch(/internal error|\n\s+at /);
    expect(text.split('\n')).toHaveLength(2);
  });

  it('a write stream fault without a path (ENOSPC) is still a fault; anything else stays a bug with its stack', () => {
    expect(exitCodeOf(errno('ENOSPC'))).toBe(6);
    const bug = new TypeError("Cannot read properties of undefined (reading 'x')");
    expect(filesystemFault(bug)).toBeUndefined();
    expect(exitCodeOf(bug)).toBe(1);
    expect(formatError(bug)).toMatch(/^internal error: TypeError/);
    expect(formatError(bug)).toMatch(/this is a bug in nvshmem-efa/);
  });
});
