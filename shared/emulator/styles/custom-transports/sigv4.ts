import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { Request } from 'express';
import type { EmulatorCredentials } from '../../core.js';

/**
 * AWS Signature Version 4, verified the way AWS does it: the canonical request is rebuilt from
 * what arrived on the wire and signed again with the secret key, then compared in constant time.
 *
 * Path convention: the client signs exactly the URL it sends. With the gateway's Bedrock base URL
 * set to `${emulator}/bedrock`, the official SDK sends and signs `/bedrock/model/{id}/invoke` with
 * `host` = the emulator's host:port, so the `/bedrock` mount prefix is part of the signed path
 * (req.originalUrl, never the router-relative req.url).
 */
export type SigV4Result = { ok: true } | { ok: false; errorType: 'InvalidSignatureException' | 'UnrecognizedClientException' | 'MissingAuthenticationTokenException'; message: string };

const ALGORITHM = 'AWS4-HMAC-SHA256';
const MAX_SKEW_MS = 5 * 60_000;
const SIGNATURE_MISMATCH =
  'The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.';

/** RFC 3986 encoding as SigV4 defines it: everything but unreserved characters is escaped. */
export function escapeUri(value: string): string {
  return encodeURIComponent(value).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/**
 * Non-S3 services encode the (already percent-encoded) path once more, so a Bedrock model id's
 * ':' is sent as %3A and signed as %253A. Empty and '.' segments drop, '..' pops, as the SDK does.
 */
export function canonicalPath(rawPath: string): string {
  const segments: string[] = [];
  for (const segment of rawPath.split('/')) {
    if (segment === '' || segment === '.') continue;
    if (segment === '..') segments.pop();
    else segments.push(segment);
  }
  const normalized = `/${segments.join('/')}${segments.length > 0 && rawPath.endsWith('/') ? '/' : ''}`;
  return escapeUri(normalized).replace(/%2F/g, '/');
}

export function canonicalQuery(rawQuery: string): string {
  const pairs = rawQuery
    .split('&')
    .filter(Boolean)
    .map((part) => {
      const at = part.indexOf('=');
      const [key, value] = at === -1 ? [part, ''] : [part.slice(0, at), part.slice(at + 1)];
      return [escapeUri(decodeURIComponent(key)), escapeUri(decodeURIComponent(value))] as const;
    })
    .filter(([key]) => key.toLowerCase() !== 'x-amz-signature');
  pairs.sort(([ak, av], [bk, bv]) => (ak < bk ? -1 : ak > bk ? 1 : av < bv ? -1 : av > bv ? 1 : 0));
  return pairs.map(([key, value]) => `${key}=${value}`).join('&');
}

const hmac = (key: Buffer | string, data: string) => createHmac('sha256', key).update(data).digest();
const sha256Hex = (data: Buffer | string) => createHash('sha256').update(data).digest('hex');

export function signingKey(secretAccessKey: string, date: string, region: string, service: string): Buffer {
  return hmac(hmac(hmac(hmac(`AWS4${secretAccessKey}`, date), region), service), 'aws4_request');
}

/** `20250101T120000Z` → Date, or undefined when malformed. */
function parseAmzDate(value: string): Date | undefined {
  const match = /^(\d{4})(\d{2})(\d{2})T(\d{2})(\d{2})(\d{2})Z$/.exec(value);
  if (!match) return undefined;
  const [, y, mo, d, h, mi, s] = match;
  return new Date(`${y}-${mo}-${d}T${h}:${mi}:${s}Z`);
}

export function verifySigV4(req: Request, body: Buffer, aws: EmulatorCredentials['aws'], service: string, now = new Date()): SigV4Result {
  const authorization = req.get('authorization');
  if (!authorization) return { ok: false, errorType: 'MissingAuthenticationTokenException', message: 'Missing Authentication Token' };
  const parsed = /^AWS4-HMAC-SHA256\s+Credential=([^,\s]+),\s*SignedHeaders=([^,\s]+),\s*Signature=([0-9a-f]{64})\s*$/.exec(authorization);
  if (!parsed) return { ok: false, errorType: 'InvalidSignatureException', message: `Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header, and the ${ALGORITHM} fields Credential, SignedHeaders and Signature.` };
  const [, credential, signedHeaderList, signature] = parsed as unknown as [string, string, string, string];

  const [accessKeyId, scopeDate, scopeRegion, scopeService, terminator, ...extra] = credential.split('/');
  if (accessKeyId !== aws.accessKeyId) return { ok: false, errorType: 'UnrecognizedClientException', message: 'The security token included in the request is invalid.' };
  if (extra.length > 0 || terminator !== 'aws4_request') return { ok: false, errorType: 'InvalidSignatureException', message: "Credential should be scoped with a valid terminator: 'aws4_request'." };
  if (scopeService !== service) return { ok: false, errorType: 'InvalidSignatureException', message: `Credential should be scoped to correct service: '${service}'.` };
  if (scopeRegion !== aws.region) return { ok: false, errorType: 'InvalidSignatureException', message: `Credential should be scoped to a valid region, not '${scopeRegion}'.` };

  const amzDate = req.get('x-amz-date') ?? '';
  const signedAt = parseAmzDate(amzDate);
  if (!signedAt) return { ok: false, errorType: 'InvalidSignatureException', message: "Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header." };
  if (scopeDate !== amzDate.slice(0, 8)) return { ok: false, errorType: 'InvalidSignatureException', message: `Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: '${scopeDate}' != '${amzDate.slice(0, 8)}'.` };
  if (Math.abs(now.getTime() - signedAt.getTime()) > MAX_SKEW_MS) {
    return { ok: false, errorType: 'InvalidSignatureException', message: `Signature expired: ${amzDate} is now earlier or later than the allowed 5 minutes of the server time ${now.toISOString()}.` };
  }

  const signedHeaders = signedHeaderList.split(';');
  if (!signedHeaders.includes('host') || !signedHeaders.includes('x-amz-date')) {
    return { ok: false, errorType: 'InvalidSignatureException', message: "'Host' and 'X-Amz-Date' must be signed headers." };
  }
  // AWS hashes the body it received; a client's x-amz-content-sha256 that disagrees fails the signature.
  const payloadHash = sha256Hex(body);
  const declaredHash = req.get('x-amz-content-sha256');
  if (declaredHash !== undefined && declaredHash !== payloadHash) return { ok: false, errorType: 'InvalidSignatureException', message: SIGNATURE_MISMATCH };

  const queryAt = req.originalUrl.indexOf('?');
  const rawPath = queryAt === -1 ? req.originalUrl : req.originalUrl.slice(0, queryAt);
  const rawQuery = queryAt === -1 ? '' : req.originalUrl.slice(queryAt + 1);
  const canonicalHeaders = signedHeaders.map((name) => {
    const value = req.headers[name];
    const joined = Array.isArray(value) ? value.join(',') : (value ?? '');
    return `${name}:${joined.replace(/[\r\n]/g, ' ').replace(/[ \t]+/g, ' ').trim()}\n`;
  });
  const canonicalRequest = [req.method, canonicalPath(rawPath), canonicalQuery(rawQuery), canonicalHeaders.join(''), signedHeaderList, payloadHash].join('\n');
  const scope = `${scopeDate}/${scopeRegion}/${scopeService}/aws4_request`;
  const stringToSign = [ALGORITHM, amzDate, scope, sha256Hex(canonicalRequest)].join('\n');
  const expected = createHmac('sha256', signingKey(aws.secretAccessKey, scopeDate, scopeRegion, scopeService)).update(stringToSign).digest();
  const provided = Buffer.from(signature, 'hex');
  if (provided.length !== expected.length || !timingSafeEqual(provided, expected)) return { ok: false, errorType: 'InvalidSignatureException', message: SIGNATURE_MISMATCH };
  return { ok: true };
}
