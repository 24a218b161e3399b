/**
 * The chunks of an HTTP response body, bounded by size and by progress: a mirror whose body never ends, or one
 * that stops sending and keeps the connection open, must end the download with a reason, not fill the disk or
 * wait until the whole transfer's deadline (issue 36, class 7). The reason is an Error the caller words for the
 * user (it names the package and the fix).
 */
export interface BodyBounds {
  /** More bytes than this, and the body is not what was asked for. */
  maxBytes: number;
  /** No byte for this long, and the server has stopped. */
  stallMs: number;
}

export async function* boundedBody(body: ReadableStream<Uint8Array>, b: BodyBounds): AsyncGenerator<Uint8Array> {
  const reader = body.getReader();
  let total = 0;
  try {
    for (;;) {
      let timer: NodeJS.Timeout | undefined;
      const stalled = new Promise<'stalled'>((resolve) => {
        timer = setTimeout(() => resolve('stalled'), b.stallMs);
      });
      const r = await Promise.race([reader.read(), stalled]).finally(() => clearTimeout(timer));
      if (r === 'stalled') throw new Error(`the server sent nothing for ${Math.round(b.stallMs / 1000)} s after ${total} bytes`);
      if (r.done) return;
      total += r.value.length;
      if (total > b.maxBytes) throw new Error(`the body is larger than ${b.maxBytes} bytes, more than such a file can be`);
      yield r.value;
    }
  } finally {
    // An ended, stalled or oversized body: let the connection go (a pending read then settles, rejected).
    await reader.cancel().catch(() => {});
  }
}
