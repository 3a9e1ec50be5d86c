import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Express } from 'express';
import { serviceError, toEnvelope, type ErrorCode, type ServiceError } from '../errors.js';
import type { Logger } from '../logger.js';

export interface ListenOptions {
  /** The body of an error the app itself never sees; the gateway's envelope unless the app has its own (the hive). */
  errorBody?: (error: ServiceError) => unknown;
}

/**
 * The HTTP server of an app. Requests Node's parser rejects before Express sees them (a broken
 * header, oversized headers) still get the app's error body, not a bare status line.
 */
/** Each server's error body, for the answers written outside its app (a malformed request, a request while stopping). */
const errorBodies = new WeakMap<http.Server, (error: ServiceError) => unknown>();

export function listen(app: Express, port: number, host: string, options: ListenOptions = {}): Promise<http.Server> {
  const errorBody = options.errorBody ?? toEnvelope;
  const server = http.createServer(
    {
      IncomingMessage: bornWith<typeof http.IncomingMessage>(http.IncomingMessage, app.request),
      ServerResponse: bornWith<typeof http.ServerResponse>(http.ServerResponse, app.response),
    },
    app,
  );
  errorBodies.set(server, errorBody);
  // Behind a load balancer, idle keep-alive sockets must outlive the balancer's own (often 60 s).
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  server.on('clientError', (error: NodeJS.ErrnoException, socket) => {
    if (!socket.writable || (error as { code?: string }).code === 'ECONNRESET') return socket.destroy();
    const tooLarge = error.code === 'HPE_HEADER_OVERFLOW';
    const code: ErrorCode = tooLarge ? 'request_too_large' : 'invalid_request';
    const body = JSON.stringify(errorBody(serviceError(code, { message: tooLarge ? 'The request headers are too large.' : 'The HTTP request is malformed.' })));
    const status = tooLarge ? '431 Request Header Fields Too Large' : '400 Bad Request';
    socket.end(`HTTP/1.1 ${status}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve(server));
  });
}

/**
 * A constructor for the server's requests (or responses) whose objects are born with the app's
 * own prototype. Express moves every req and res onto app.request and app.response as it enters
 * the app (Object.setPrototypeOf, expressjs/express#5998), which costs V8 a hidden-class change
 * per object. Born with that prototype, Express's call changes nothing: the metered hot path took
 * about a sixth less CPU per request, and its young-generation collections came a quarter less
 * often and paused half as long (see the README's benchmarks).
 */
function bornWith<Constructor extends new (...args: never[]) => object>(base: Constructor, prototype: object): Constructor {
  // Node's IncomingMessage and ServerResponse are function constructors, run on the new object as
  // Node's own subclasses run them; were one ever a class, Reflect.construct does the same.
  const isClass = Function.prototype.toString.call(base).startsWith('class');
  function Born(this: object, ...args: unknown[]): object | void {
    if (isClass) return Reflect.construct(base, args, Born) as object;
    (base as unknown as (...args: unknown[]) => void).apply(this, args);
  }
  Born.prototype = prototype;
  return Born as unknown as Constructor;
}

/**
 * From now on a new request, which a kept-alive connection can still bring after the server stopped
 * accepting connections, is answered 503 shutting_down with Retry-After and the connection closed;
 * requests already in the app run to their end.
 */
export function answerStopping(server: http.Server): void {
  const body = JSON.stringify((errorBodies.get(server) ?? toEnvelope)(serviceError('shutting_down')));
  server.removeAllListeners('request');
  server.on('request', (_req: http.IncomingMessage, res: http.ServerResponse) => {
    res.writeHead(503, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), 'Retry-After': '1', Connection: 'close' });
    res.end(body);
  });
}

export function serverUrl(server: http.Server): string {
  const { address, port } = server.address() as AddressInfo;
  return `http://${address.includes(':') ? `[${address}]` : address}:${port}`;
}

/** How long a stopping server waits for requests in flight before it cuts their connections. */
const SHUTDOWN_GRACE_MS = 10_000;

/**
 * On SIGTERM or SIGINT: stop accepting, let requests in flight finish (at most SHUTDOWN_GRACE_MS),
 * close the process's connections, exit 0. A second signal while stopping changes nothing.
 */
export function stopOnSignals(server: http.Server, services: { logger: Logger; close(): Promise<void> }, name: string): void {
  let stopping = false;
  async function stop(signal: string): Promise<void> {
    if (stopping) return;
    stopping = true;
    services.logger.info({ signal }, `${name} stopping`);
    answerStopping(server);
    const forced = setTimeout(() => server.closeAllConnections(), SHUTDOWN_GRACE_MS).unref();
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
    await closed;
    clearTimeout(forced);
    await services.close();
    process.exit(0);
  }
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}
