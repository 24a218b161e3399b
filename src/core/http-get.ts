/**
 * An HTTP(S) GET that goes where curl would: Node 20's global fetch ignores the proxy variables that git and curl
 * honour, so a host that reaches the internet only through a proxy saw every download fail (issue 39). undici's
 * EnvHttpProxyAgent does the routing (no_proxy matching included); this module only reads the variables the way
 * curl does and words a failure so that it names the proxy it went through. undici is loaded on the first
 * download, never at start-up.
 */

/** The proxy settings of a download, read from the environment as curl reads them. */
export interface ProxyEnv {
  /** For http:// URLs: http_proxy (curl ignores upper-case HTTP_PROXY, and so does this). */
  http?: string;
  /** For https:// URLs: https_proxy, else HTTPS_PROXY (no fallback to http_proxy, as in curl). */
  https?: string;
  /** Hosts (and domains, and host:port) reached directly: no_proxy, else NO_PROXY; `*` means every host. */
  noProxy?: string;
}

const nonEmpty = (...v: (string | undefined)[]) => v.find((x) => x !== undefined && x !== '');

export function proxyEnv(env: NodeJS.ProcessEnv = process.env): ProxyEnv {
  return { http: nonEmpty(env.http_proxy), https: nonEmpty(env.https_proxy, env.HTTPS_PROXY), noProxy: nonEmpty(env.no_proxy, env.NO_PROXY) };
}

/** A proxy written without a scheme (`proxy.corp:3128`) is an HTTP proxy, as curl takes it. */
const withScheme = (p: string) => (/^[a-z][a-z0-9+.-]*:\/\//i.test(p) ? p : `http://${p}`);

/** The variable a URL's proxy would come from, for messages ("https_proxy=http://proxy:3128"; no_proxy may still bypass it). */
function proxyLabel(url: string, env: NodeJS.ProcessEnv): string | undefined {
  const https = new URL(url).protocol === 'https:';
  const names = https ? ['https_proxy', 'HTTPS_PROXY'] : ['http_proxy'];
  const name = names.find((n) => nonEmpty(env[n]));
  return name ? `${name}=${env[name]}` : undefined;
}

export interface HttpGetOptions {
  signal: AbortSignal;
  env?: NodeJS.ProcessEnv;
}

/**
 * GETs `url` (redirects followed) and returns the response body; a status other than 2xx, or a connection that
 * fails, is an Error whose message says why and, when a proxy variable is set, which one. The caller bounds the body.
 */
export async function httpGet(url: string, o: HttpGetOptions): Promise<ReadableStream<Uint8Array>> {
  const env = o.env ?? process.env;
  const { EnvHttpProxyAgent, fetch } = await import('undici');
  const p = proxyEnv(env);
  // Only the proxy of this URL's scheme is given: undici would otherwise send https through http_proxy, which curl does not.
  const https = new URL(url).protocol === 'https:';
  const proxy = https ? p.https : p.http;
  // proxyTunnel false: an http:// URL is asked of the proxy as an absolute-URI GET, as curl does (https:// always tunnels).
  const dispatcher = new EnvHttpProxyAgent({ httpProxy: proxy ? withScheme(proxy) : '', httpsProxy: proxy ? withScheme(proxy) : '', noProxy: p.noProxy ?? '', proxyTunnel: false });
  const via = proxyLabel(url, env);
  try {
    const res = await fetch(url, { signal: o.signal, redirect: 'follow', dispatcher });
    if (!res.ok || !res.body) {
      await res.body?.cancel().catch(() => {});
      throw new Error(`HTTP ${res.status} ${res.statusText}${via ? ` (${via} is set)` : ''}`);
    }
    return res.body as ReadableStream<Uint8Array>;
  } catch (e) {
    if (o.signal.aborted || /^HTTP \d/.test((e as Error).message)) throw e;
    const cause = (e as { cause?: { code?: string; message?: string } }).cause;
    const why = cause?.code ?? cause?.message ?? (e as Error).message;
    // No `cause`: callers word the message as it is (fabric-source reads a cause's code first).
    throw new Error(`${why}${via ? ` (${via} is set)` : ''}`);
  }
}
