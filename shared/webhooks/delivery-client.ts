import { readFileSync } from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import { guardedLookup, hostOf, isUnsafeAddress, UnsafeAddressError } from './url-guard.js';

/**
 * The HTTP side of a delivery attempt: one POST of the raw body, success only for a 2xx that
 * arrives within the timeout. Redirects are never followed (a 3xx is a failure). One keep-alive
 * agent per process, whose lookup refuses unsafe addresses at connection time.
 */
export interface DeliveryClientOptions {
  timeoutMs: number;
  allowPrivateHosts: boolean;
  /** Extra trusted CAs (PEM file), added to Node's own roots. */
  extraCaFile?: string;
  maxSockets?: number;
}

export interface AttemptResult {
  ok: boolean;
  /** The receiver's status code; null when no response arrived. */
  status: number | null;
  /** Why the attempt failed, for the deliveries list; null on success. */
  error: string | null;
  durationMs: number;
}

const MAX_DRAINED_BYTES = 64 * 1024;

export class DeliveryClient {
  private readonly agent: https.Agent;

  constructor(private readonly options: DeliveryClientOptions) {
    const extraCa = options.extraCaFile ? readFileSync(options.extraCaFile, 'utf8') : undefined;
    this.agent = new https.Agent({
      keepAlive: true,
      maxSockets: options.maxSockets ?? 256,
      maxFreeSockets: 256,
      lookup: guardedLookup(options.allowPrivateHosts) as unknown as https.AgentOptions['lookup'],
      // One secure context built once: a `ca` option would be re-read into every connection's pool
      // key and context (the whole root store, per request).
      ...(extraCa && { secureContext: tls.createSecureContext({ ca: [...tls.rootCertificates, extraCa] }) }),
    });
  }

  post(target: string, rawBody: string, headers: Record<string, string>): Promise<AttemptResult> {
    const started = performance.now();
    const finish = (status: number | null, error: string | null): AttemptResult => ({
      ok: error === null && status !== null && status >= 200 && status < 300,
      status,
      error,
      durationMs: Math.round(performance.now() - started),
    });

    let url: URL;
    try {
      url = new URL(target);
    } catch {
      return Promise.resolve(finish(null, 'the endpoint url is not a valid URL'));
    }
    if (url.protocol !== 'https:') return Promise.resolve(finish(null, 'the endpoint url is not https'));
    const host = hostOf(url);
    // A literal address never goes through the agent's lookup, so it is checked here.
    if (net.isIP(host) && !this.options.allowPrivateHosts && isUnsafeAddress(host)) {
      return Promise.resolve(finish(null, new UnsafeAddressError(host, host).message));
    }

    return new Promise((resolve) => {
      let settled = false;
      const done = (status: number | null, error: string | null) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(finish(status, error));
      };
      const request = https.request(
        url,
        {
          method: 'POST',
          agent: this.agent,
          headers: { ...headers, 'Content-Type': 'application/json', 'Content-Length': String(Buffer.byteLength(rawBody)) },
        },
        (response) => {
          const status = response.statusCode ?? null;
          // Drain (bounded) so the keep-alive socket can be reused; the body itself is not kept.
          let drained = 0;
          response.on('data', (chunk: Buffer) => {
            drained += chunk.length;
            if (drained > MAX_DRAINED_BYTES) response.destroy();
          });
          response.on('end', () => done(status, status !== null && status >= 200 && status < 300 ? null : `the receiver answered ${status}`));
          response.on('error', () => done(status, status !== null && status >= 200 && status < 300 ? null : `the receiver answered ${status}`));
          response.on('close', () => done(status, status !== null && status >= 200 && status < 300 ? null : `the receiver answered ${status}`));
        },
      );
      const timer = setTimeout(() => {
        done(null, `no response within ${this.options.timeoutMs} ms`);
        request.destroy();
      }, this.options.timeoutMs);
      request.on('error', (error: NodeJS.ErrnoException) => done(null, describeNetworkError(error)));
      request.end(rawBody);
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

function describeNetworkError(error: NodeJS.ErrnoException): string {
  if (error instanceof UnsafeAddressError) return error.message;
  return error.code ? `${error.code}: ${error.message}` : error.message;
}
