import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { queryTool } from './exec.ts';

/**
 * Which Python a command names, and which torch it would import, for a build step's stamp: without importing
 * torch, which takes seconds (a stamp is computed on every run, and an unchanged rerun must be a no-op).
 *
 * Why this is sound without the import:
 * - One interpreter start with no import beyond importlib says which interpreter, which version and which
 *   prefix answer (sys.executable, sys.version, sys.prefix), and where `torch` would be imported from
 *   (find_spec locates a top-level package without running its __init__). Asking the interpreter, rather than
 *   stat-ing the file PYTHON names, is what sees through a pyenv shim (the same script whatever version it
 *   runs), a venv (a link to the base interpreter; only sys.prefix tells them apart) and PYTHONPATH.
 * - torch/version.py is written by every torch install and build: it holds __version__ (with the CUDA suffix),
 *   git_version and cuda. Another torch there (pip upgrade, another wheel, a source build) rewrites it; its
 *   bytes identify the torch a C++ extension is built against.
 * - The command's resolved file (path, size, time) covers an interpreter that cannot answer (then nothing
 *   else is known, and a changed one still shows).
 * The import itself (does torch load?) is checked where it is needed: by the preflight and by the build.
 */
const SCRIPT = [
  'import importlib.util as u, json, sys',
  'def where(name):',
  '    try:',
  '        s = u.find_spec(name)',
  '    except Exception:',
  '        return None',
  '    return (s.origin or next(iter(s.submodule_search_locations or []), None)) if s else None',
  "print(json.dumps({'executable': sys.executable, 'version': sys.version, 'prefix': sys.prefix, 'torch': where('torch'), 'nvshmem': where('nvidia.nvshmem')}))",
].join('\n');

export interface PythonIdentity {
  command: string;
  /** The file the command runs, as found on PATH, with its size and modification time. */
  file?: string;
  /** What the interpreter said about itself (JSON), or its raw output when it did not answer in JSON. */
  answer: unknown;
  /** sha256 of torch/version.py next to the torch it would import; null when it has none. */
  torch: string | null;
}

async function resolveCommand(command: string): Promise<string | undefined> {
  const candidates = command.includes('/') ? [command] : (process.env.PATH ?? '').split(':').filter(Boolean).map((d) => path.join(d, command));
  for (const c of candidates) {
    try {
      const st = await stat(c);
      if (st.isFile()) return `${await realpath(c)} ${st.size} ${st.mtimeMs}`;
    } catch {
      /* not here */
    }
  }
  return undefined;
}

async function torchVersionFile(answer: unknown): Promise<string | null> {
  const origin = answer && typeof answer === 'object' ? (answer as { torch?: unknown }).torch : undefined;
  if (typeof origin !== 'string' || !origin) return null;
  const file = path.join(path.dirname(origin), 'version.py');
  if (!existsSync(file)) return null;
  return createHash('sha256').update(await readFile(file)).digest('hex');
}

export async function pythonIdentity(command: string): Promise<PythonIdentity> {
  const [file, out] = await Promise.all([resolveCommand(command), queryTool(command, ['-c', SCRIPT])]);
  let answer: unknown = out?.trim() ?? null;
  try {
    answer = JSON.parse(String(answer));
  } catch {
    /* an interpreter that does not answer in JSON: its raw output is what is known */
  }
  return { command, ...(file ? { file } : {}), answer, torch: await torchVersionFile(answer) };
}
