import { createHash, createHmac } from 'node:crypto';

/**
 * AWS Signature Version 4 for one request, written against node:crypto so production code needs
 * no AWS SDK. The signature covers exactly the URL that is sent (a base URL's path prefix such as
 * the emulator's `/bedrock` included), the `host` of that URL, every header passed in, and the body.
 */
export interface SignRequestOptions {
  method: string;
  url: string;
  /** Headers that will be sent and are to be signed (e.g. content-type); names in any case. */
  headers: Record<string, string>;
  body: string | Uint8Array | undefined;
  region: string;
  service: string;
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  now: Date;
  /**
   * Sends (and signs) x-amz-content-sha256. On by default; AWS's published test vectors predate
   * the header, so the example test turns it off to reproduce their signature exactly.
   */
  includeContentSha256?: boolean;
}

const ALGORITHM = 'AWS4-HMAC-SHA256';

const hmac = (key: Buffer | string, data: string) => createHmac('sha256', key).update(data).digest();
const sha256Hex = (data: string | Uint8Array) => createHash('sha256').update(data).digest('hex');

/** RFC 3986 escaping as SigV4 defines it: everything but A-Z a-z 0-9 - _ . ~ is escaped. */
function escapeUri(value: string): string {
  return encodeURIComponent(value).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/**
 * Services other than S3 escape the already-escaped path once more, so a model id sent as
 * `anthropic.claude-v1%3A0` is signed as `anthropic.claude-v1%253A0`.
 */
function canonicalPath(pathname: string): string {
  const segments: string[] = [];
  for (const segment of pathname.split('/')) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') segments.pop();
    else segments.push(escapeUri(segment));
  }
  const trailing = segments.length > 0 && pathname.endsWith('/') ? '/' : '';
  return `/${segments.join('/')}${trailing}`;
}

function canonicalQuery(search: string): string {
  const pairs = search
    .replace(/^\?/, '')
    .split('&')
    .filter(Boolean)
    .map((part) => {
      const at = part.indexOf('=');
      const [key, value] = at === -1 ? [part, ''] : [part.slice(0, at), part.slice(at + 1)];
      return [escapeUri(decodeURIComponent(key)), escapeUri(decodeURIComponent(value))] as const;
    });
  pairs.sort(([ak, av], [bk, bv]) => (ak < bk ? -1 : ak > bk ? 1 : av < bv ? -1 : av > bv ? 1 : 0));
  return pairs.map(([key, value]) => `${key}=${value}`).join('&');
}

/** `2015-08-30T12:36:00.000Z` → `20150830T123600Z`. */
const amzDate = (now: Date) => now.toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '');

/** The headers to add to the request: x-amz-date, x-amz-content-sha256, authorization, x-amz-security-token. */
export function signRequest(options: SignRequestOptions): Record<string, string> {
  const url = new URL(options.url);
  const date = amzDate(options.now);
  const day = date.slice(0, 8);
  const payloadHash = sha256Hex(options.body ?? '');
  const added: Record<string, string> = { 'x-amz-date': date };
  if (options.includeContentSha256 !== false) added['x-amz-content-sha256'] = payloadHash;
  if (options.sessionToken) added['x-amz-security-token'] = options.sessionToken;

  const signed = new Map<string, string>();
  for (const [name, value] of Object.entries({ ...options.headers, ...added })) signed.set(name.toLowerCase(), value.replace(/\s+/g, ' ').trim());
  // fetch sends Host as the URL's host (with a non-default port), so that is what is signed.
  signed.set('host', url.host);
  const names = [...signed.keys()].sort();
  const signedHeaders = names.join(';');
  const canonicalRequest = [
    options.method.toUpperCase(),
    canonicalPath(url.pathname),
    canonicalQuery(url.search),
    names.map((name) => `${name}:${signed.get(name)}\n`).join(''),
    signedHeaders,
    payloadHash,
  ].join('\n');

  const scope = `${day}/${options.region}/${options.service}/aws4_request`;
  const stringToSign = [ALGORITHM, date, scope, sha256Hex(canonicalRequest)].join('\n');
  const key = hmac(hmac(hmac(hmac(`AWS4${options.secretAccessKey}`, day), options.region), options.service), 'aws4_request');
  const signature = createHmac('sha256', key).update(stringToSign).digest('hex');
  return { ...added, authorization: `${ALGORITHM} Credential=${options.accessKeyId}/${scope}, SignedHeaders=${signedHeaders}, Signature=${signature}` };
}
