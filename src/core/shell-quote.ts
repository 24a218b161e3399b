/** A word as POSIX sh reads it back unchanged: bare when safe, else in single quotes (for commands printed to be pasted). */
export const shellQuote = (s: string): string => (/^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);
