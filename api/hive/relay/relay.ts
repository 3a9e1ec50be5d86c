import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { pipeline } from 'node:stream';
import type { CertificateAuthority } from '../../../shared/hive/certificate-authority.js';
import { toHiveErrorBody } from '../../../shared/hive/errors.js';
import type { MachineGate } from '../../../shared/hive/machine-gate.js';
import type { Logger } from '../../../shared/logger.js';

/**
 * The hive's mutual-TLS relay (spec 3): enrolled machines reach the hive through it with their
 * certificates. TLS asks every client for a certificate and checks it against the hive's CA (and
 * its validity dates); the relay then answers 401 for a connection without one or with one from
 * another CA, 403 for a certificate whose machine is revoked, expired or unknown (MachineGate, at
 * every request, not once a connection, so a revocation also stops a kept-alive connection), and
 * forwards everything else to the hive as it came (method, path, headers, body), streamed both ways.
 *
 * The relay vouches for nothing downstream: the hive authenticates requests by their Bearer token,
 * and the one route authenticated by the certificate, POST /v1/machine/renew, carries a proof
 * signed with the certificate's key (shared/hive/machine-proof.ts), so a caller reaching the hive
 * directly can forge nothing the relay would have added.
 *
 * Its server certificate is issued by the hive's CA for its host names at start and re-issued
 * daily (machines trust the CA certificate enrolment gave them, nothing else).
 */
export interface RelayOptions {
  authority: CertificateAuthority;
  gate: MachineGate;
  logger: Logger;
  /** The hive the relay forwards to (http://HIVE_HOST:HIVE_PORT). */
  upstream: string;
  host: string;
  port: number;
  /** Further names its certificate must carry: the host of the public address machines are given (HIVE_RELAY_PUBLIC_URL). */
  names?: string[];
}

export interface Relay {
  server: https.Server;
  url: string;
  close(): Promise<void>;
}

const SERVER_CERTIFICATE_DAYS = 7;
const REISSUE_EVERY_MS = 86_400_000;
/** Headers of one hop (RFC 9110 7.6.1): not forwarded. */
const HOP_BY_HOP = ['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'proxy-authorization', 'proxy-authenticate'];

export async function startRelay(options: RelayOptions): Promise<Relay> {
  const { authority, gate, logger } = options;
  const upstream = new URL(options.upstream);
  const hosts = [options.host, ...(options.names ?? []), 'localhost', '127.0.0.1', '::1'].filter((host) => host !== '0.0.0.0' && host !== '::');
  const secureContext = async () => {
    const issued = await authority.issueServerCertificate(hosts, SERVER_CERTIFICATE_DAYS);
    return { cert: issued.certificate.pem, key: issued.privateKeyPem, ca: authority.certificatePem };
  };

  const server = https.createServer({ ...(await secureContext()), requestCert: true, rejectUnauthorized: false }, (req, res) => {
    void relay(req, res).catch((error: unknown) => {
      logger.error({ err: error }, 'relay failed');
      if (!res.headersSent) refuse(res, 502, 'The relay could not reach the hive.');
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 65_000;

  async function relay(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const socket = req.socket as TLSSocket;
    const peer = socket.getPeerCertificate();
    if (!peer || !peer.serialNumber) return refuse(res, 401, 'The relay needs a client certificate issued by the hive (enrol a machine first).');
    if (!socket.authorized) return refuse(res, 401, `The client certificate is not one the hive's CA issued, or it has expired (${String(socket.authorizationError)}).`);
    const answer = await gate.admit(peer.serialNumber.toLowerCase());
    if (!answer.pass) return refuse(res, 403, answer.reason);

    const headers = { ...req.headers };
    for (const name of HOP_BY_HOP) delete headers[name];
    headers['x-forwarded-proto'] = 'https';
    headers['x-forwarded-for'] = [req.headers['x-forwarded-for'], socket.remoteAddress].filter(Boolean).join(', ');
    const forwarded = http.request({ host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers }, (answered) => {
      const back = { ...answered.headers };
      for (const name of HOP_BY_HOP) delete back[name];
      res.writeHead(answered.statusCode ?? 502, back);
      pipeline(answered, res, () => undefined);
    });
    forwarded.on('error', (error) => {
      logger.warn({ err: error }, 'relay: the hive did not answer');
      if (!res.headersSent) refuse(res, 502, 'The relay could not reach the hive.');
      else res.destroy();
    });
    pipeline(req, forwarded, () => undefined);
  }

  const reissue = setInterval(() => {
    secureContext()
      .then((context) => server.setSecureContext(context))
      .catch((error: unknown) => logger.error({ err: error }, 'relay: could not re-issue its server certificate'));
  }, REISSUE_EVERY_MS).unref();

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const { address, port } = server.address() as AddressInfo;
  return {
    server,
    url: `https://${address.includes(':') ? `[${address}]` : address}:${port}`,
    async close() {
      clearInterval(reissue);
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      await gate.close();
    },
  };
}

function refuse(res: http.ServerResponse, status: number, message: string): void {
  const body = JSON.stringify(toHiveErrorBody({ message }));
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}
