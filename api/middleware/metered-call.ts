import type { Socket } from 'node:net';
import type { Request, RequestHandler, Response } from 'express';
import type { ClientTokenScope } from '../../shared/accounts/authenticate.js';
import type { DeveloperScope } from '../../shared/accounts/scopes.js';
import { walletHeaders, type CachedCredentials, type MeteredCall } from '../../shared/billing/metered-call.js';
import { attributeCustomer, getCustomer, type CustomerRow } from '../../shared/customers/customers.js';
import { serviceError } from '../../shared/errors.js';
import { recordCustomerRateLimited } from '../../shared/customers/rate-limit-events.js';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import type { LimitLayer } from '../../shared/ratelimit/limiter.js';
import { clientTokenLayer, customerLayers, customerTokensKey, developerLayers, developerTokensKey, edgeLayer } from '../../shared/ratelimit/layers.js';
import { authenticateClientToken } from './client-token.js';
import { clientIp, requireScope, verifyDeveloperKey } from './authenticate.js';

declare global {
  namespace Express {
    interface Request {
      /**
       * What a metered route knows about its call once the pipeline ran: who pays, for which
       * customer, what it bills, and which token-per-minute counters the tokens it uses go to.
       */
      meteredCall?: MeteredCall;
    }
  }
}

/**
 * The chain every metered route runs before its handler (chat, embeddings, moderations...):
 * 1. authentication: a `ko_` key with the route's scope, or a client token whose own scope lists
 *    the route (its origin allowlist and IP binding checked);
 * 2. attribution: a client token's pinned customer, or Svc-Customer / body `user` under Bearer,
 *    created on first use unless Svc-Customer-Strict is true or lazy creation is off;
 * 3. the four rate-limit layers (edge, client token, developer, customer) in one Redis round trip,
 *    or for a busy caller from a block of requests that round trip already counted.
 * The handler then reserves, calls upstream and settles through callUpstream (startMeteredCall).
 */
export function meteredCall(
  platform: GatewayServices,
  scopes: {
    /** The developer-key scope the route needs, or 'any' for a route open to every valid key. */
    developer: DeveloperScope | 'any';
    /** The client-token scope that reaches the route, or null when client tokens may not call it. */
    clientToken: ClientTokenScope | null;
  },
): RequestHandler {
  const { config, db, limiter } = platform;
  return async (req, res, next) => {
    const credential = req.credential;
    if (!credential) throw serviceError('missing_token');

    let developerId: string;
    let payerAccountId: string;
    let customer: CustomerRow | null;
    let credentials: CachedCredentials | undefined;
    const layers: LimitLayer[] = [edgeLayer(config, clientIp(req), credential.value)];
    if (credential.scheme === 'client') {
      if (scopes.clientToken === null) throw serviceError('endpoint_not_allowed_for_client_token');
      const token = await authenticateClientToken(platform, req, scopes.clientToken);
      developerId = token.accountId;
      payerAccountId = token.accountId;
      customer = await getCustomer(db, developerId, token.customerId);
      if (customer.status !== 'active') throw serviceError('customer_not_found', { message: 'The customer of this client token is archived.' });
      layers.push(clientTokenLayer(token.jti, token.rpmLimit));
    } else {
      const scope = scopes.developer === 'any' ? undefined : scopes.developer;
      const reference = attributionOf(req);
      const attribution = reference ? { reference, strict: /^true$/i.test(req.get('svc-customer-strict') ?? '') } : undefined;
      const { principal, generation } = await cachedDeveloperKey(platform, req, credential.value, scope);
      developerId = principal.accountId;
      payerAccountId = principal.billingAccountId;
      customer = attribution ? await platform.credentials.customer(developerId, generation, attribution) : null;
      if (config.CREDENTIAL_CACHE_SECONDS > 0) {
        const presented = credential.value;
        credentials = {
          generation,
          // The reservation found the cache stale: read both again, as an uncached call would.
          async reverify() {
            platform.credentials.forgetKey(presented);
            await verifyDeveloperKey(platform, req, presented, scope);
            return attribution ? attributeCustomer(db, limiter, developerId, attribution, config.LAZY_CREATE_PER_MINUTE) : null;
          },
        };
      }
    }
    layers.push(...developerLayers(config, developerId));
    if (customer) layers.push(...customerLayers(customer));

    const decision = await platform.meteringTimings.time('rate_limit', limiter.consume(layers));
    if (!decision.allowed) {
      if (decision.layer.code === 'customer_rate_limit_exceeded' && customer) await recordCustomerRateLimited(platform, developerId, customer.id);
      throw serviceError(decision.layer.code, { retryAfterSeconds: decision.retryAfterSeconds });
    }
    if (decision.remaining !== undefined) res.setHeader('X-RateLimit-Remaining', String(decision.remaining));

    req.meteredCall = {
      developerId,
      payerAccountId,
      customer,
      billableOverrideMicros: billableOverride(req),
      tokenCounterKeys: [developerTokensKey(developerId), ...(customer?.tpm_limit != null ? [customerTokensKey(customer.id)] : [])],
      // The request id is part of the call, so routes hand the call on as it is: a `{ ...call, requestId }`
      // copy per request kept the whole request alive through young-generation collections (README).
      requestId: String(req.id),
      credentials,
    };
    next();
  };
}

export function meteredCallOf(req: Request): MeteredCall {
  if (!req.meteredCall) throw new Error('route reached without the metered-call pipeline');
  return req.meteredCall;
}

/** Svc-Customer wins over the body's `user`; both name a `cus_` id or an external id. */
function attributionOf(req: Request): string | undefined {
  const header = req.get('svc-customer')?.trim();
  if (header) return header;
  const user = (req.body as { user?: unknown } | undefined)?.user;
  if (user === undefined || user === null || user === '') return undefined;
  if (typeof user !== 'string') throw serviceError('invalid_request', { param: 'user', message: 'user must be a string: a cus_ id or your own id for the end user.' });
  return user;
}

function billableOverride(req: Request): number | undefined {
  const header = req.get('x-svc-billable-amount');
  if (header === undefined) return undefined;
  if (!/^\d{1,15}$/.test(header.trim())) {
    throw serviceError('invalid_request', { param: 'X-Svc-Billable-Amount', message: 'X-Svc-Billable-Amount must be a non-negative integer number of micro-dollars.' });
  }
  return Number(header.trim());
}


/**
 * A `ko_` key for a metered call: from the process's CredentialCache when caching is on (its
 * generation then travels to the reservation, which catches a revocation), else from PostgreSQL.
 */
async function cachedDeveloperKey(platform: GatewayServices, req: Request, presented: string, scope: DeveloperScope | undefined) {
  if (platform.config.CREDENTIAL_CACHE_SECONDS === 0) return { principal: await verifyDeveloperKey(platform, req, presented, scope), generation: 0 };
  const verified = await platform.credentials.developerKey(presented);
  requireScope(verified.principal, scope);
  req.principal = verified.principal;
  return verified;
}

/** X-Svc-Wallet-Deducted and X-Svc-Wallet-Balance (USD) after a settled call. */
export function setWalletHeaders(res: Response, settled: { deductedMicros: number; balanceAfterMicros: number | null }): void {
  for (const [name, value] of Object.entries(walletHeaders(settled))) res.setHeader(name, value);
}

/** Each client connection's abort signal, made when a metered route on it first asks for one. */
const connectionAborts = new WeakMap<Socket, ConnectionAbort>();

/**
 * A connection's abort signal and how many of the responses that asked for it are unfinished: the
 * client left mid-response when its socket closes with one still unfinished. It holds no response,
 * so an idle keep-alive connection keeps nothing of its last request alive.
 */
class ConnectionAbort {
  readonly controller = new AbortController();
  unfinished = 0;
  /** One listener for every response on the connection, so asking costs no closure a request. */
  readonly responseFinished = () => {
    this.unfinished -= 1;
  };

  constructor(socket: Socket) {
    socket.once('close', () => {
      if (this.unfinished > 0) this.controller.abort();
    });
  }
}

/**
 * A signal that aborts the upstream call when the client goes away before its response is complete.
 * It belongs to the client's connection, and the calls a keep-alive connection carries one after
 * another share it (each removes its listeners when it completes): a signal made per request
 * outlived young-generation collections (Node gives each a new prototype after creating it), and
 * the call that held it went along (README, "The 500/s tail").
 */
export function abortWhenClientLeaves(res: Response): AbortSignal {
  const socket = res.req.socket;
  if (socket.destroyed) return AbortSignal.abort();
  let connection = connectionAborts.get(socket);
  if (!connection) {
    connection = new ConnectionAbort(socket);
    connectionAborts.set(socket, connection);
  }
  connection.unfinished += 1;
  res.on('finish', connection.responseFinished);
  return connection.controller.signal;
}
