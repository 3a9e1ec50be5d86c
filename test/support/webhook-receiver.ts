import { execFileSync } from 'node:child_process';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';

/**
 * A webhook receiver for tests: a local HTTPS server with a self-signed certificate made for the
 * run (openssl; the platform trusts it through WEBHOOK_EXTRA_CA_FILE). It records every request
 * with its raw body, and answers each path as the test tells it (default 200).
 */
export interface ReceivedRequest {
  path: string;
  headers: Record<string, string | string[] | undefined>;
  rawBody: string;
  receivedAt: number;
  /** The status this receiver answered. */
  answered: number;
}

export type Responder = (request: ReceivedRequest, seenOnPath: number) => number | Promise<number>;

export interface WebhookReceiver {
  /** https://127.0.0.1:<port> */
  origin: string;
  port: number;
  /** The PEM file of the self-signed certificate (for WEBHOOK_EXTRA_CA_FILE). */
  caFile: string;
  requests: ReceivedRequest[];
  on(path: string, responder: Responder): void;
  /** Resolves once `predicate` holds over the recorded requests. */
  waitFor(predicate: (requests: ReceivedRequest[]) => boolean, timeoutMs?: number): Promise<ReceivedRequest[]>;
  close(): Promise<void>;
}

export function makeSelfSignedCertificate(): { dir: string; keyFile: string; certFile: string } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-webhook-receiver-'));
  const keyFile = path.join(dir, 'key.pem');
  const certFile = path.join(dir, 'cert.pem');
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', keyFile, '-out', certFile, '-days', '2',
      '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1', '-addext', 'basicConstraints=critical,CA:TRUE'],
    { stdio: 'ignore' },
  );
  return { dir, keyFile, certFile };
}

export async function startWebhookReceiver(certificate = makeSelfSignedCertificate()): Promise<WebhookReceiver> {
  const requests: ReceivedRequest[] = [];
  const responders = new Map<string, Responder>();
  const seen = new Map<string, number>();
  const waiters = new Set<() => void>();

  const server = https.createServer({ key: readFileSync(certificate.keyFile), cert: readFileSync(certificate.certFile) }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', async () => {
      const pathname = new URL(req.url ?? '/', 'https://receiver').pathname;
      const request: ReceivedRequest = { path: pathname, headers: req.headers, rawBody: Buffer.concat(chunks).toString('utf8'), receivedAt: Date.now(), answered: 200 };
      const count = (seen.get(pathname) ?? 0) + 1;
      seen.set(pathname, count);
      const status = await (responders.get(pathname)?.(request, count) ?? 200);
      request.answered = status;
      requests.push(request);
      if (status >= 300 && status < 400) res.setHeader('Location', '/redirected');
      res.writeHead(status, { 'content-type': 'text/plain' }).end(status < 300 ? 'ok' : 'no');
      for (const wake of waiters) wake();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;

  return {
    origin: `https://127.0.0.1:${port}`,
    port,
    caFile: certificate.certFile,
    requests,
    on: (pathname, responder) => void responders.set(pathname, responder),
    waitFor(predicate, timeoutMs = 60_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          if (!predicate(requests)) return;
          cleanup();
          resolve(requests);
        };
        const timer = setTimeout(() => {
          cleanup();
          reject(new Error(`the receiver did not see what was expected within ${timeoutMs} ms (${requests.length} requests so far)`));
        }, timeoutMs);
        const cleanup = () => {
          clearTimeout(timer);
          waiters.delete(check);
        };
        waiters.add(check);
        check();
      });
    },
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      rmSync(certificate.dir, { recursive: true, force: true });
    },
  };
}

/**
 * Verifies X-Svc-Signature exactly as the README tells receivers to: the timestamp within five
 * minutes, then HMAC-SHA256 over `${t}.${rawBody}` compared in constant time with every v1
 * (two during a rotation grace window; either may match).
 */
export function verifySvcSignature(rawBody: string, header: string | undefined, secret: string, toleranceSeconds = 300): boolean {
  if (!header) return false;
  const pairs = header.split(',').map((part) => {
    const at = part.indexOf('=');
    return [part.slice(0, at).trim(), part.slice(at + 1).trim()] as const;
  });
  const timestamp = Number(pairs.find(([key]) => key === 't')?.[1]);
  if (!Number.isInteger(timestamp) || Math.abs(Date.now() / 1000 - timestamp) > toleranceSeconds) return false;
  const expected = createHmac('sha256', secret).update(`${timestamp}.${rawBody}`).digest();
  return pairs
    .filter(([key]) => key === 'v1')
    .some(([, hex]) => {
      const given = Buffer.from(hex, 'hex');
      return given.length === expected.length && timingSafeEqual(given, expected);
    });
}

/** What a test platform needs to deliver to this receiver: private hosts allowed (tests only), its CA trusted, a quick relay. */
export function receiverEnv(receiver: WebhookReceiver): Record<string, string> {
  return { WEBHOOK_ALLOW_PRIVATE_HOSTS: 'true', WEBHOOK_EXTRA_CA_FILE: receiver.caFile, WEBHOOK_RELAY_POLL_MS: '250' };
}
