/**
 * Where GDRCopy is looked for when neither --gdrcopy-home nor GDRCOPY_HOME names it (--help and docs/cli.md list
 * these). A module of its own, importing nothing: the CLI's help reads it without loading environment.ts.
 */
export const GDRCOPY_PREFIXES = ['/usr/local/gdrdrv', '/opt/gdrcopy', '/usr/local', '/usr'] as const;
