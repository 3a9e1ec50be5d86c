import { createHash, createPrivateKey } from 'node:crypto';
import { lastJsonOfChildScript } from './support/child-script.js';
import { expectError } from './support/expect-error.js';
import type http from 'node:http';
import express from 'express';
import { decodeJwt, decodeProtectedHeader, SignJWT, type JWTPayload } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGatewayApp } from '../api/app.js';
import { listen, serverUrl } from '../shared/platform/http-server.js';
import { readCredential } from '../api/middleware/authenticate.js';
import { authenticateClientToken } from '../api/middleware/client-token.js';
import { errorHandler } from '../api/middleware/errors.js';
import { authorizeClientTokenCall, verifyClientToken } from '../shared/client-tokens/client-tokens.js';
import { generateClientTokenJwk, loadClientTokenKeys, type ClientTokenSigningJwk } from '../shared/client-tokens/keys.js';
import { ConfigError, loadConfig } from '../shared/config.js';
import type { GatewayServices } from '../shared/composition/gateway.js';
import { bearer, call, createDeveloper, startTestPlatform, type ApiResponse, type TestDeveloper, type TestPlatform } from './support/test-platform.js';

const k1 = generateClientTokenJwk('k1');
const k2 = generateClientTokenJwk('k2');
const silent = { warn: () => undefined };

let gateway: TestPlatform;
let developer: TestDeveloper;
let probe: Probe;
const servers: http.Server[] = [];

beforeAll(async () => {
  gateway = await startTestPlatform({ CLIENT_TOKEN_SIGNING_KEYS: JSON.stringify([k1]) });
  developer = await createDeveloper(gateway.platform); // admin: customers and client tokens
  probe = await startProbe(gateway.platform);
});
afterAll(async () => {
  for (const server of servers) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
  await gateway?.close();
});

// ---------------------------------------------------------------------------------------------
// Helpers

const tokensPath = (customer: string) => `/v1/customers/${customer}/client_tokens`;
const post = (path: string, json: unknown, key = developer.key) => call(gateway.baseUrl, path, { method: 'POST', json, headers: bearer(key) });
const get = (path: string, key = developer.key) => call(gateway.baseUrl, path, { headers: bearer(key) });
const del = (path: string, key = developer.key) => call(gateway.baseUrl, path, { method: 'DELETE', headers: bearer(key) });

async function newCustomer(fields: Record<string, unknown> = {}, key = developer.key): Promise<string> {
  const created = await post('/v1/customers', fields, key);
  expect(created.status).toBe(200);
  return created.body.id;
}

async function mint(customer: string, body: Record<string, unknown> = {}, baseUrl = gateway.baseUrl): Promise<{ token: string; jti: string }> {
  const minted = await call(baseUrl, tokensPath(customer), { method: 'POST', json: body, headers: bearer(developer.key) });
  expect(minted.status).toBe(200);
  return minted.body;
}


interface Probe {
  url: string;
  send(token: string, headers?: Record<string, string>): Promise<ApiResponse>;
}

/**
 * A stand-in for the metered routes that come later: the real credential parser, a route that
 * runs authenticateClientToken for the chat scope and echoes the principal, and the real error
 * handler. `trustProxy` makes Express take the caller IP from X-Forwarded-For (one hop), which is
 * how a test reaches the API "from another address" over loopback.
 */
async function startProbe(platform: GatewayServices, options: { trustProxy?: boolean } = {}): Promise<Probe> {
  const app = express();
  if (options.trustProxy) app.set('trust proxy', 1);
  app.use(readCredential);
  app.post('/probe', async (req, res) => {
    res.json(await authenticateClientToken(platform, req, 'chat'));
  });
  app.use(errorHandler);
  const server = await listen(app, 0, '127.0.0.1');
  servers.push(server);
  const url = serverUrl(server);
  return { url, send: (token, headers = {}) => call(url, '/probe', { method: 'POST', headers: { Authorization: `Client ${token}`, ...headers } }) };
}

/** Another API replica of the same database and Redis with its own key configuration. */
async function withKeys(keys: ClientTokenSigningJwk[]): Promise<{ platform: GatewayServices; baseUrl: string; probe: Probe }> {
  const platform: GatewayServices = { ...gateway.platform, clientTokenKeys: loadClientTokenKeys({ CLIENT_TOKEN_SIGNING_KEYS: keys }, silent) };
  const server = await listen(createGatewayApp(platform), 0, '127.0.0.1');
  servers.push(server);
  return { platform, baseUrl: serverUrl(server), probe: await startProbe(platform) };
}

/** A JWT signed here, with any header and claims; by default with the configured key k1. */
function sign(claims: JWTPayload, options: { jwk?: ClientTokenSigningJwk; kid?: string } = {}): Promise<string> {
  const jwk = options.jwk ?? k1;
  return new SignJWT(claims)
    .setProtectedHeader({ alg: 'EdDSA', kid: options.kid ?? jwk.kid, typ: 'JWT' })
    .sign(createPrivateKey({ key: { kty: jwk.kty, crv: jwk.crv, x: jwk.x, d: jwk.d }, format: 'jwk' }));
}

const base64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
const now = () => Math.floor(Date.now() / 1000);

// ---------------------------------------------------------------------------------------------

describe('mint', () => {
  let customer: string;
  beforeAll(async () => {
    customer = await newCustomer();
  });

  it('mints with the defaults: chat, 900 s, 60 rpm, no allowlist, not IP bound; the JWT is EdDSA with kid, sub, jti and the developer', async () => {
    const minted = await post(tokensPath(customer), {});
    expect(minted.status).toBe(200);
    expect(Object.keys(minted.body).sort()).toEqual(['expires_at', 'jti', 'object', 'scope', 'token']);
    expect(minted.body).toMatchObject({ object: 'client_token', scope: ['chat'] });
    expect(minted.body.jti).toMatch(/^ctok_[0-9A-Za-z]{24}$/);

    expect(decodeProtectedHeader(minted.body.token)).toEqual({ alg: 'EdDSA', kid: 'k1', typ: 'JWT' });
    const claims = decodeJwt(minted.body.token);
    expect(claims).toMatchObject({ iss: 'svc-gateway', sub: customer, jti: minted.body.jti, svc_developer_id: developer.accountId, svc_scope: ['chat'] });
    expect(claims.exp! - claims.iat!).toBe(900);
    expect(minted.body.expires_at).toBe(new Date(claims.exp! * 1000).toISOString());

    const { rows } = await gateway.platform.db.query('SELECT * FROM client_tokens WHERE jti = $1', [minted.body.jti]);
    expect(rows[0]).toMatchObject({ developer_id: developer.accountId, customer_id: customer, scope: ['chat'], rpm_limit: 60, origin_allowlist: [], ip_hash: null });
    expect(rows[0].expires_at.toISOString()).toBe(minted.body.expires_at);
  });

  it('stores only the registry row, never the token', async () => {
    const { rows } = await gateway.platform.db.query(`SELECT column_name FROM information_schema.columns WHERE table_name = 'client_tokens' ORDER BY ordinal_position`);
    expect(rows.map((row) => row.column_name)).toEqual([
      'jti',
      'developer_id',
      'customer_id',
      'scope',
      'rpm_limit',
      'origin_allowlist',
      'ip_hash',
      'created_at',
      'expires_at',
      'revoked_at',
    ]);
  });

  it('takes every field, by ext: reference too, removing duplicate scopes and origins, and hashes the mint IP when bind_ip', async () => {
    const byExternalId = await newCustomer({ external_id: 'browser-user' });
    const minted = await post(tokensPath('ext:browser-user'), {
      ttl_seconds: 60,
      scope: ['chat', 'embeddings', 'chat'],
      rpm_limit: 600,
      origin_allowlist: ['https://app.example', 'https://app.example', 'o'.repeat(512)],
      bind_ip: true,
    });
    expect(minted.status).toBe(200);
    expect(minted.body.scope).toEqual(['chat', 'embeddings']);
    const claims = decodeJwt(minted.body.token);
    expect({ sub: claims.sub, ttl: claims.exp! - claims.iat! }).toEqual({ sub: byExternalId, ttl: 60 });
    const { rows } = await gateway.platform.db.query('SELECT rpm_limit, origin_allowlist, ip_hash FROM client_tokens WHERE jti = $1', [minted.body.jti]);
    expect(rows[0]).toEqual({
      rpm_limit: 600,
      origin_allowlist: ['https://app.example', 'o'.repeat(512)],
      ip_hash: createHash('sha256').update(`${byExternalId}|127.0.0.1`).digest(),
    });
  });

  it.each([
    [{ ttl_seconds: 59 }, 'invalid_ttl', 'ttl_seconds'],
    [{ ttl_seconds: 3601 }, 'invalid_ttl', 'ttl_seconds'],
    [{ ttl_seconds: 'x' }, 'invalid_ttl', 'ttl_seconds'],
    [{ ttl_seconds: 900.5 }, 'invalid_ttl', 'ttl_seconds'],
    [{ scope: ['admin'] }, 'invalid_scope', 'scope'],
    [{ scope: ['chat', 'api:chat'] }, 'invalid_scope', 'scope'],
    [{ scope: [] }, 'invalid_scope', 'scope'],
    [{ scope: 'chat' }, 'invalid_scope', 'scope'],
    [{ rpm_limit: 0 }, 'invalid_rpm_limit', 'rpm_limit'],
    [{ rpm_limit: 601 }, 'invalid_rpm_limit', 'rpm_limit'],
    [{ rpm_limit: 1.5 }, 'invalid_rpm_limit', 'rpm_limit'],
    [{ rpm_limit: '60' }, 'invalid_rpm_limit', 'rpm_limit'],
    [{ origin_allowlist: [''] }, 'invalid_origin_allowlist', 'origin_allowlist'],
    [{ origin_allowlist: ['o'.repeat(513)] }, 'invalid_origin_allowlist', 'origin_allowlist'],
    [{ origin_allowlist: [42] }, 'invalid_origin_allowlist', 'origin_allowlist'],
    [{ origin_allowlist: 'https://app.example' }, 'invalid_origin_allowlist', 'origin_allowlist'],
    [{ bind_ip: 'yes' }, 'invalid_request', 'bind_ip'],
    [{ token: 'mine' }, 'invalid_request', 'token'],
  ])('400 for %j', async (body, code, param) => {
    expectError(await post(tokensPath(customer), body), 400, code, { param: param });
  });

  it("400 rpm_exceeds_customer_cap above the customer's rpm_limit; an omitted rpm_limit takes a lower customer cap", async () => {
    const slow = await newCustomer({ rpm_limit: 30 });
    expectError(await post(tokensPath(slow), { rpm_limit: 31 }), 400, 'rpm_exceeds_customer_cap', { param: 'rpm_limit' });
    const atCap = await mint(slow, { rpm_limit: 30 });
    const omitted = await mint(slow);
    const fast = await newCustomer({ rpm_limit: 100 });
    const defaulted = await mint(fast);
    expectError(await post(tokensPath(fast), { rpm_limit: 101 }), 400, 'rpm_exceeds_customer_cap', { param: 'rpm_limit' });
    const { rows } = await gateway.platform.db.query('SELECT jti, rpm_limit FROM client_tokens WHERE jti = ANY($1)', [[atCap.jti, omitted.jti, defaulted.jti]]);
    expect(Object.fromEntries(rows.map((row) => [row.jti, row.rpm_limit]))).toEqual({ [atCap.jti]: 30, [omitted.jti]: 30, [defaulted.jti]: 60 });
  });

  it("404 not_found for an unknown customer, a bare name, and another developer's customer", async () => {
    const other = await createDeveloper(gateway.platform);
    const theirs = await newCustomer({ external_id: 'theirs' }, other.key);
    for (const id of ['cus_doesnotexist', 'ext:nobody', 'nobody', theirs, 'ext:theirs']) expectError(await post(tokensPath(id), {}), 404, 'not_found', { param: undefined });
  });

  it('needs api:client_tokens to mint and revoke, api:read to list', async () => {
    const reader = await createDeveloper(gateway.platform, { scopes: ['api:read'] });
    const minter = await createDeveloper(gateway.platform, { scopes: ['api:client_tokens'] });
    expectError(await post(tokensPath(customer), {}, reader.key), 403, 'insufficient_scope', { param: undefined });
    expectError(await del(`${tokensPath(customer)}/ctok_x`, reader.key), 403, 'insufficient_scope', { param: undefined });
    expectError(await post(`${tokensPath(customer)}/revoke_all`, {}, reader.key), 403, 'insufficient_scope', { param: undefined });
    expectError(await get(tokensPath(customer), minter.key), 403, 'insufficient_scope', { param: undefined });
  });

  it('429 mint_rate_limit with Retry-After: 60 past 100 mints a minute for one customer, counting exactly 100 of a concurrent burst', async () => {
    const busy = await newCustomer();
    const responses = await Promise.all(Array.from({ length: 110 }, () => post(tokensPath(busy), {})));
    expect(responses.filter((response) => response.status === 200)).toHaveLength(100);
    const refused = responses.filter((response) => response.status !== 200);
    expect(refused).toHaveLength(10);
    for (const response of refused) {
      expect(response.status).toBe(429);
      expect(response.body.error).toMatchObject({ type: 'rate_limit_error', code: 'mint_rate_limit', retry_after_seconds: 60 });
      expect(response.headers.get('retry-after')).toBe('60');
    }
    // Per customer: another customer of the same developer still mints.
    expect((await post(tokensPath(await newCustomer()), {})).status).toBe(200);
  });
});

describe('list and revoke', () => {
  it('lists active tokens only, never the token, in the cursor envelope', async () => {
    const customer = await newCustomer();
    const kept = await mint(customer, { origin_allowlist: ['https://a.example'], bind_ip: true, rpm_limit: 5 });
    const revoked = await mint(customer);
    const expired = await mint(customer);
    expect((await del(`${tokensPath(customer)}/${revoked.jti}`)).status).toBe(204);
    await gateway.platform.db.query(`UPDATE client_tokens SET expires_at = now() - interval '1 second' WHERE jti = $1`, [expired.jti]);

    const listed = await get(tokensPath(customer));
    expect(listed.status).toBe(200);
    expect(listed.body).toMatchObject({ object: 'list', has_more: false, next_cursor: null });
    expect(listed.body.data).toHaveLength(1);
    expect(listed.body.data[0]).toEqual({
      jti: kept.jti,
      object: 'client_token',
      scope: ['chat'],
      created_at: expect.any(String),
      expires_at: expect.any(String),
      rpm_limit: 5,
      origin_allowlist: ['https://a.example'],
      ip_bound: true,
    });
    for (const token of [kept.token, revoked.token, expired.token]) expect(listed.text).not.toContain(token);
  });

  it('pages with limit and after, in creation order', async () => {
    const customer = await newCustomer();
    const jtis = [];
    for (let i = 0; i < 5; i++) jtis.push((await mint(customer)).jti);
    const seen = [];
    let after = '';
    for (;;) {
      const page = await get(`${tokensPath(customer)}?limit=2${after ? `&after=${after}` : ''}`);
      expect(page.body.data.length).toBeLessThanOrEqual(2);
      seen.push(...page.body.data.map((token: { jti: string }) => token.jti));
      if (!page.body.has_more) break;
      after = page.body.next_cursor;
    }
    expect(seen).toEqual(jtis); // creation order
  });

  it('revokes one with 204, again with 204; the token stops verifying', async () => {
    const customer = await newCustomer();
    const token = await mint(customer);
    expect((await probe.send(token.token)).status).toBe(200);
    const first = await del(`${tokensPath(customer)}/${token.jti}`);
    expect({ status: first.status, text: first.text }).toEqual({ status: 204, text: '' });
    expect((await del(`${tokensPath(customer)}/${token.jti}`)).status).toBe(204);
    expectError(await probe.send(token.token), 401, 'invalid_client_token', { param: undefined });
  });

  it("404 not_found for an unknown jti, another customer's jti, and another developer's", async () => {
    const customer = await newCustomer();
    const sibling = await newCustomer();
    const siblingToken = await mint(sibling);
    const other = await createDeveloper(gateway.platform);
    const theirCustomer = await newCustomer({}, other.key);
    const theirToken = (await post(tokensPath(theirCustomer), {}, other.key)).body;

    expectError(await del(`${tokensPath(customer)}/ctok_unknownunknownunknown1`), 404, 'not_found', { param: undefined });
    expectError(await del(`${tokensPath(customer)}/${siblingToken.jti}`), 404, 'not_found', { param: undefined });
    expectError(await del(`${tokensPath(customer)}/${theirToken.jti}`), 404, 'not_found', { param: undefined });
    expectError(await del(`${tokensPath(theirCustomer)}/${theirToken.jti}`), 404, 'not_found', { param: undefined });
    expectError(await get(tokensPath(theirCustomer)), 404, 'not_found', { param: undefined });
    expectError(await post(`${tokensPath(theirCustomer)}/revoke_all`, {}), 404, 'not_found', { param: undefined });
    // None of those attempts revoked anything.
    expect((await probe.send(siblingToken.token)).status).toBe(200);
    expect((await probe.send(theirToken.token)).status).toBe(200);
  });

  it('revoke_all counts the tokens it revoked, leaves other customers alone, and counts 0 the second time', async () => {
    const customer = await newCustomer();
    const tokens = [await mint(customer), await mint(customer), await mint(customer)];
    await del(`${tokensPath(customer)}/${tokens[0]!.jti}`);
    const bystander = await mint(await newCustomer());

    const revoked = await post(`${tokensPath(customer)}/revoke_all`, {});
    expect({ status: revoked.status, body: revoked.body }).toEqual({ status: 200, body: { revoked_count: 2 } });
    expect((await post(`${tokensPath(customer)}/revoke_all`, {})).body).toEqual({ revoked_count: 0 });
    for (const token of tokens) expectError(await probe.send(token.token), 401, 'invalid_client_token', { param: undefined });
    expect((await probe.send(bystander.token)).status).toBe(200);
    expect((await get(tokensPath(customer))).body.data).toEqual([]);
  });

  it('403 endpoint_not_allowed_for_client_token when a client token calls the Bearer routes', async () => {
    const customer = await newCustomer();
    const token = await mint(customer, { scope: ['chat', 'conversations', 'embeddings', 'moderations', 'assistants_threads'] });
    const client = { Authorization: `Client ${token.token}` };
    const attempts = [
      call(gateway.baseUrl, tokensPath(customer), { method: 'POST', json: {}, headers: client }),
      call(gateway.baseUrl, tokensPath(customer), { headers: client }),
      call(gateway.baseUrl, `${tokensPath(customer)}/${token.jti}`, { method: 'DELETE', headers: client }),
      call(gateway.baseUrl, `${tokensPath(customer)}/revoke_all`, { method: 'POST', json: {}, headers: client }),
      call(gateway.baseUrl, `/v1/customers/${customer}`, { headers: client }),
    ];
    for (const response of await Promise.all(attempts)) expectError(response, 403, 'endpoint_not_allowed_for_client_token', { param: undefined });
    expect((await probe.send(token.token)).status).toBe(200); // the DELETE attempt revoked nothing
  });
});

describe('verification (the Client scheme)', () => {
  let customer: string;
  let live: { token: string; jti: string };
  beforeAll(async () => {
    customer = await newCustomer();
    live = await mint(customer);
  });

  it('200 with the principal for a valid token', async () => {
    const response = await probe.send(live.token);
    expect(response.status).toBe(200);
    expect(response.body).toEqual({ kind: 'client_token', accountId: developer.accountId, jti: live.jti, customerId: customer, scopes: ['chat'], rpmLimit: 60 });
  });

  it('answers every bad token with the very same 401 invalid_client_token', async () => {
    const claims = (overrides: JWTPayload = {}): JWTPayload => ({
      iss: 'svc-gateway',
      sub: customer,
      jti: live.jti,
      svc_developer_id: developer.accountId,
      svc_scope: ['chat'],
      iat: now(),
      exp: now() + 600,
      ...overrides,
    });

    const revoked = await mint(customer);
    await del(`${tokensPath(customer)}/${revoked.jti}`);
    const expiredInRegistry = await mint(customer, { ttl_seconds: 60 });
    await gateway.platform.db.query(
      `UPDATE client_tokens SET created_at = now() - interval '2 minutes', expires_at = now() - interval '1 minute' WHERE jti = $1`,
      [expiredInRegistry.jti],
    );
    const otherCustomer = await newCustomer();
    const otherDeveloper = await createDeveloper(gateway.platform);
    const publicKeyBytes = Buffer.from(k1.x, 'base64url');
    const closedDeveloper = await createDeveloper(gateway.platform);
    const closedToken = (await post(tokensPath(await newCustomer({}, closedDeveloper.key)), {}, closedDeveloper.key)).body.token;
    await gateway.platform.db.query(`UPDATE accounts SET status = 'closed', closed_at = now() WHERE id = $1`, [closedDeveloper.accountId]);

    const bad: Record<string, string> = {
      revoked: revoked.token,
      'expired in the registry': expiredInRegistry.token,
      'expired JWT (past exp) of a live registry row': await sign(claims({ iat: now() - 120, exp: now() - 60 })),
      'unknown jti signed with the configured key': await sign(claims({ jti: 'ctok_notinregistrynotinregist' })),
      'sub of another customer': await sign(claims({ sub: otherCustomer })),
      'another developer': await sign(claims({ svc_developer_id: otherDeveloper.accountId })),
      'wrong issuer': await sign(claims({ iss: 'someone-else' })),
      'alg none': `${base64url({ alg: 'none', typ: 'JWT' })}.${base64url(claims())}.`,
      'HS256 keyed with the public key': await new SignJWT(claims()).setProtectedHeader({ alg: 'HS256', kid: 'k1', typ: 'JWT' }).sign(publicKeyBytes),
      'another Ed25519 key with the same kid': await sign(claims(), { jwk: generateClientTokenJwk('k1') }),
      'unknown kid': await sign(claims(), { kid: 'k9' }),
      'closed developer account': closedToken,
      'tampered payload': `${live.token.split('.')[0]}.${base64url(claims({ svc_scope: ['chat', 'embeddings'], exp: now() + 3000 }))}.${live.token.split('.')[2]}`,
      garbage: 'not-a-jwt',
      'three empty parts': '..',
    };
    const expected = { error: { type: 'authentication_error', code: 'invalid_client_token', message: 'The client token is invalid, revoked or expired.' } };
    for (const [name, token] of Object.entries(bad)) {
      const response = await probe.send(token);
      expect({ name, status: response.status, body: response.body }).toEqual({ name, status: 401, body: expected });
    }
    // An empty token never reaches a route over HTTP (the header is trimmed to `Client`); the function refuses it alike.
    await expect(verifyClientToken(gateway.platform, '')).rejects.toMatchObject({ status: 401, code: 'invalid_client_token' });
    // The live token is untouched by all of the above.
    expect((await probe.send(live.token)).status).toBe(200);
  });

  it('403 endpoint_not_allowed_for_client_token when the token lacks the scope the endpoint needs', async () => {
    const embeddingsOnly = await mint(customer, { scope: ['embeddings', 'moderations'] });
    expectError(await probe.send(embeddingsOnly.token), 403, 'endpoint_not_allowed_for_client_token', { param: undefined });
  });

  it('origin allowlist: an exact match passes; another, a near miss or a missing Origin is 403 origin_not_allowed', async () => {
    const token = await mint(customer, { origin_allowlist: ['https://app.example', 'http://localhost:5173'] });
    expect((await probe.send(token.token, { Origin: 'https://app.example' })).status).toBe(200);
    expect((await probe.send(token.token, { Origin: 'http://localhost:5173' })).status).toBe(200);
    expectError(await probe.send(token.token, { Origin: 'https://evil.example' }), 403, 'origin_not_allowed', { param: undefined });
    expectError(await probe.send(token.token, { Origin: 'https://app.example/' }), 403, 'origin_not_allowed', { param: undefined });
    expectError(await probe.send(token.token), 403, 'origin_not_allowed', { param: undefined });
    // A token without an allowlist takes any Origin, or none.
    expect((await probe.send(live.token, { Origin: 'https://anywhere.example' })).status).toBe(200);
  });

  it('IP binding: the mint address passes; another address is 403 ip_binding_violation, and so is an unknown one', async () => {
    // Minted over loopback, so bound to 127.0.0.1. The probe trusts one proxy hop, so a request
    // carrying X-Forwarded-For comes "from" that address while one without it is still 127.0.0.1.
    const bound = await mint(customer, { bind_ip: true });
    const behindProxy = await startProbe(gateway.platform, { trustProxy: true });
    expect((await behindProxy.send(bound.token)).status).toBe(200);
    expect((await behindProxy.send(bound.token, { 'X-Forwarded-For': '127.0.0.1' })).status).toBe(200);
    expectError(await behindProxy.send(bound.token, { 'X-Forwarded-For': '203.0.113.7' }), 403, 'ip_binding_violation', { param: undefined });
    expect((await behindProxy.send(live.token, { 'X-Forwarded-For': '203.0.113.7' })).status).toBe(200); // unbound tokens do not care
    await expect(authorizeClientTokenCall(gateway.platform, bound.token, { scope: 'chat', origin: undefined, ip: undefined })).rejects.toMatchObject({
      status: 403,
      code: 'ip_binding_violation',
    });
  });

  it('runs the checks in order: verification, scope, origin, then IP', async () => {
    const behindProxy = await startProbe(gateway.platform, { trustProxy: true });
    const fenced = await mint(customer, { origin_allowlist: ['https://app.example'], bind_ip: true });
    const elsewhere = { 'X-Forwarded-For': '203.0.113.7' };
    expectError(await behindProxy.send(fenced.token, { ...elsewhere, Origin: 'https://evil.example' }), 403, 'origin_not_allowed', { param: undefined });
    expectError(await behindProxy.send(fenced.token, { ...elsewhere, Origin: 'https://app.example' }), 403, 'ip_binding_violation', { param: undefined });
    const wrongScope = await mint(customer, { scope: ['embeddings'], origin_allowlist: ['https://app.example'] });
    expectError(await behindProxy.send(wrongScope.token, { Origin: 'https://evil.example' }), 403, 'endpoint_not_allowed_for_client_token', { param: undefined });
    await del(`${tokensPath(customer)}/${wrongScope.jti}`);
    expectError(await behindProxy.send(wrongScope.token, { Origin: 'https://evil.example' }), 401, 'invalid_client_token', { param: undefined });
  });
});

describe('signing keys', () => {
  it('rotation: [k2, k1] still verifies k1 tokens and signs new ones with k2; [k2] alone refuses the k1 tokens', async () => {
    const customer = await newCustomer();
    const old = await mint(customer);
    expect(decodeProtectedHeader(old.token).kid).toBe('k1');

    const rotated = await withKeys([k2, k1]);
    expect((await rotated.probe.send(old.token)).body).toMatchObject({ jti: old.jti, customerId: customer });
    const fresh = await mint(customer, {}, rotated.baseUrl);
    expect(decodeProtectedHeader(fresh.token)).toEqual({ alg: 'EdDSA', kid: 'k2', typ: 'JWT' });
    expect((await rotated.probe.send(fresh.token)).status).toBe(200);
    expectError(await probe.send(fresh.token), 401, 'invalid_client_token', { param: undefined }); // a replica still on [k1] does not know k2

    const retired = await withKeys([k2]);
    expectError(await retired.probe.send(old.token), 401, 'invalid_client_token', { param: undefined });
    expect((await retired.probe.send(fresh.token)).status).toBe(200);
  });

  it('reads CLIENT_TOKEN_SIGNING_KEYS as a JSON array of Ed25519 JWKs with unique kids, and refuses anything else', () => {
    expect(loadConfig({ CLIENT_TOKEN_SIGNING_KEYS: JSON.stringify([k2, k1]) }).CLIENT_TOKEN_SIGNING_KEYS?.map((key) => key.kid)).toEqual(['k2', 'k1']);
    for (const value of ['not json', '[]', '{}', JSON.stringify([k1, k1]), JSON.stringify([{ ...k1, crv: 'P-256' }]), JSON.stringify([{ ...k1, kid: undefined }])]) {
      expect(() => loadConfig({ CLIENT_TOKEN_SIGNING_KEYS: value })).toThrow(/CLIENT_TOKEN_SIGNING_KEYS/);
    }
    // Well-formed JSON whose key material is not a key stops the platform at start.
    expect(() => loadClientTokenKeys({ CLIENT_TOKEN_SIGNING_KEYS: [{ ...k1, d: 'AAAA' }] }, silent)).toThrow(ConfigError);
  });

  it('is required in production; elsewhere an unset value gives one ephemeral key per process, with a warning once', async () => {
    expect(() => loadConfig({ NODE_ENV: 'production' })).toThrow(/CLIENT_TOKEN_SIGNING_KEYS: required/);
    expect(loadConfig({ NODE_ENV: 'production', CLIENT_TOKEN_SIGNING_KEYS: JSON.stringify([k1]) }).CLIENT_TOKEN_SIGNING_KEYS).toHaveLength(1);

    // In a child process: the ephemeral key is the process's, and test files share theirs.
    const script = `
      import { loadClientTokenKeys } from './shared/client-tokens/keys.ts';
      const warnings = [];
      const logger = { warn: (message) => void warnings.push(message) };
      const first = loadClientTokenKeys({ CLIENT_TOKEN_SIGNING_KEYS: undefined }, logger);
      const second = loadClientTokenKeys({ CLIENT_TOKEN_SIGNING_KEYS: undefined }, logger);
      console.log(JSON.stringify({ first: first.signing.kid, second: second.signing.kid, warnings: warnings.length }));
    `;
    const { first, second, warnings } = await lastJsonOfChildScript<{ first: string; second: string; warnings: number }>(script);
    expect(first).toMatch(/^ephemeral-/);
    expect(second).toBe(first);
    expect(warnings).toBe(1);
  });
});

describe('registry purge', () => {
  it('deletes rows a day past expiry and keeps recent ones', async () => {
    const { purgeExpiredClientTokens } = await import('../shared/client-tokens/client-tokens.js');
    const { rows: before } = await gateway.platform.db.query('SELECT jti FROM client_tokens ORDER BY jti LIMIT 2');
    expect(before.length).toBe(2);
    const [old, recent] = before.map((row) => row.jti as string);
    await gateway.platform.db.query(`UPDATE client_tokens SET expires_at = now() - interval '25 hours' WHERE jti = $1`, [old]);
    await gateway.platform.db.query(`UPDATE client_tokens SET expires_at = now() - interval '1 hour' WHERE jti = $1`, [recent]);
    expect(await purgeExpiredClientTokens(gateway.platform.db)).toBe(1);
    const { rows: after } = await gateway.platform.db.query('SELECT jti FROM client_tokens WHERE jti = ANY($1)', [[old, recent]]);
    expect(after.map((row) => row.jti)).toEqual([recent]);
  });
});
