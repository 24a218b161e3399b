import { readFile } from 'node:fs/promises';

/**
 * The patch engine works on a file's bytes, not on decoded text: a file is read as a "byte string", one
 * character (U+0000..U+00FF) per byte (Node's latin1 view), so offsets are byte offsets and every byte the patch
 * does not edit is written back as it was read, whatever the file holds (Latin-1, bytes that are no UTF-8 at all,
 * a byte order mark, CRLF line ends). Decoding as UTF-8 would turn each invalid byte into U+FFFD and write back
 * three other bytes. What the tool itself inserts (spec lines, templates) is UTF-8 text and is turned into its
 * byte string before it meets a file's; messages and the --dry-run diff decode byte strings for display only.
 */

/** A file's bytes as a byte string. */
export const byteString = (b: Uint8Array): string => Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('latin1');

/** The tool's own text (spec lines, templates, file names) as the byte string of its UTF-8 encoding. */
export const utf8Bytes = (text: string): string => Buffer.from(text, 'utf8').toString('latin1');

/** A byte string for display (a diff on a terminal, a message): decoded as UTF-8, the encoding sources mostly have. */
export const display = (bytes: string): string => Buffer.from(bytes, 'latin1').toString('utf8');

export async function readByteString(file: string): Promise<string> {
  return byteString(await readFile(file));
}

/**
 * The bytes of a byte string, checked: a character above U+00FF means tool text was mixed in without utf8Bytes,
 * and Buffer.from(…, 'latin1') would silently keep only its low byte. Nothing is written then.
 */
export function toBytes(s: string, what: string): Buffer {
  for (let i = 0; i < s.length; i++) {
    if (s.charCodeAt(i) > 0xff) throw new Error(`${what}: character U+${s.charCodeAt(i).toString(16).toUpperCase().padStart(4, '0')} at offset ${i} is not a byte (tool text not encoded as UTF-8)`);
  }
  return Buffer.from(s, 'latin1');
}

/** The line end a file uses, judged by its first line: CRLF files get CRLF in what is inserted. */
export function lineEndOf(src: string): '\r\n' | '\n' {
  const nl = src.indexOf('\n');
  return nl > 0 && src[nl - 1] === '\r' ? '\r\n' : '\n';
}

/** `text` (lines ended by \n) with the file's line ends. */
export const withLineEnds = (text: string, eol: '\r\n' | '\n'): string => (eol === '\n' ? text : text.replace(/\r?\n/g, '\r\n'));

const BOM = '\xef\xbb\xbf';

/**
 * What the parsers (tree-sitter, the CMake scanner) read: the byte string with a UTF-8 byte order mark blanked
 * into three spaces, so offsets still match the file and the mark is not taken for code.
 */
export const parseView = (src: string): string => (src.startsWith(BOM) ? `   ${src.slice(3)}` : src);
