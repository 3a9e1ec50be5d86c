import pg from 'pg';
import { expectError } from './support/expect-error.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordEvent } from '../shared/events/outbox.js';
import { EVENT_TYPES } from '../shared/events/types.js';
import { relayOutbox } from '../shared/webhooks/delivery.js';
import { DeliveryClient } from '../shared/webhooks/delivery-client.js';
import { insertDeliveries, recordAttempts } from '../shared/webhooks/repository.js';
import { bearer, call, createDeveloper, startTestPlatform, type TestDeveloper, type TestPlatform } from './support/test-platform.js';
import { receiverEnv, startWebhookReceiver, verifySvcSignature, type ReceivedRequest, type WebhookReceiver } from './support/webhook-receiver.js';
import { startWorkerProcess, type WorkerProcess } from './support/worker-process.js';
import { pollUntil } from './support/poll.js';

let receiver: WebhookReceiver;
let gateway: TestPlatform;
let worker: WorkerProcess;
let developer: TestDeveloper;

beforeAll(async () => {
  receiver = await startWebhookReceiver();
  gateway = await startTestPlatform({
    ...receiverEnv(receiver),
    WEBHOOK_RETRY_SCHEDULE_SECONDS: '1,1,1,1,1',
    WEBHOOK_FAILURE_STREAK_THRESHOLD: '4',
    WEBHOOK_TIMEOUT_MS: '2000',
  });
  developer = await createDeveloper(gateway.platform, { scopes: ['api:webhooks', 'api:write'] });
  worker = await startWorkerProcess(gateway.env);
}, 120_000);

afterAll(async () => {
  await worker?.stop();
  await gateway?.close();
  await receiver?.close();
});

const post = (path: string, json: unknown, key = developer.key) => call(gateway.baseUrl, path, { method: 'POST', json, headers: bearer(key) });
const patch = (path: string, json: unknown, key = developer.key) => call(gateway.baseUrl, path, { method: 'PATCH', json, headers: bearer(key) });
const get = (path: string, key = developer.key) => call(gateway.baseUrl, path, { headers: bearer(key) });
const del = (path: string, key = developer.key) => call(gateway.baseUrl, path, { method: 'DELETE', headers: bearer(key) });


let urlCount = 0;
const freshUrl = (name = 'hook') => `${receiver.origin}/${name}-${++urlCount}`;

async function register(key: string, url: string, events: string[] = ['customer.created'], extra: Record<string, unknown> = {}) {
  const response = await post('/v1/webhooks', { url, events, ...extra }, key);
  expect(response.status).toBe(200);
  return response.body;
}

/** Polls until `read` returns a value that passes `accept` (no timing is asserted, only the outcome). */
const eventually = <T>(read: () => Promise<T>, accept: (value: T) => boolean, timeoutMs = 45_000) =>
  pollUntil(read, accept, { timeoutMs, context: () => `worker:\n${worker.output().slice(-20).join('\n')}` });

const onPath = (path: string) => receiver.requests.filter((request) => request.path === path);
const pathOf = (url: string) => new URL(url).pathname;
const envelope = (request: ReceivedRequest) => JSON.parse(request.rawBody);
const header = (request: ReceivedRequest, name: string) => request.headers[name.toLowerCase()] as string | undefined;

async function deliveriesOf(key: string, endpointId: string): Promise<any[]> {
  const response = await get(`/v1/webhooks/${endpointId}/deliveries`, key);
  expect(response.status).toBe(200);
  return response.body.data;
}

describe('registering an endpoint', () => {
  it('creates an endpoint with a whsec_ secret shown once, and reads it back redacted', async () => {
    const url = freshUrl();
    const created = await register(developer.key, url, ['customer.created', 'wallet.low'], { description: 'billing sync' });
    expect(created).toMatchObject({
      object: 'webhook_endpoint',
      url,
      description: 'billing sync',
      events: ['customer.created', 'wallet.low'],
      status: 'active',
      failure_streak: 0,
      rotation_grace_minutes: 1440,
      previous_secret_expires_at: null,
      last_success_at: null,
      last_failure_at: null,
    });
    expect(created.id).toMatch(/^wh_[0-9A-Za-z]{24}$/);
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);

    const one = await get(`/v1/webhooks/${created.id}`);
    expect(one.status).toBe(200);
    expect(one.body.id).toBe(created.id);
    expect(one.body).not.toHaveProperty('secret');
    expect(one.text).not.toContain(created.secret);

    const list = await get('/v1/webhooks?limit=100');
    expect(list.body.object).toBe('list');
    expect(list.body.data.map((endpoint: any) => endpoint.id)).toContain(created.id);
    expect(list.text).not.toContain('whsec_');
  });

  it('accepts every registered event type, the reserved run.* ones included; there are 34', async () => {
    expect(EVENT_TYPES).toHaveLength(34);
    expect(new Set(EVENT_TYPES).size).toBe(34);
    const created = await register(developer.key, freshUrl(), [...EVENT_TYPES]);
    expect(created.events).toHaveLength(34);
    const reserved = await register(developer.key, freshUrl(), ['run.completed', 'run.failed', 'run.cancelled']);
    expect(reserved.events).toEqual(['run.completed', 'run.failed', 'run.cancelled']);
  });

  it.each([
    [{ events: ['customer.created'] }, 'invalid_url'],
    [{ url: '', events: ['customer.created'] }, 'invalid_url'],
    [{ url: 42, events: ['customer.created'] }, 'invalid_url'],
    [{ url: 'http://127.0.0.1:9/hook', events: ['customer.created'] }, 'insecure_webhook_url'],
    [{ url: 'ftp://example.com/hook', events: ['customer.created'] }, 'insecure_webhook_url'],
    [{ url: 'not a url', events: ['customer.created'] }, 'malformed_webhook_url'],
    [{ url: 'https://user:pass@127.0.0.1/hook', events: ['customer.created'] }, 'malformed_webhook_url'],
    [{ url: 'https://127.0.0.1/a' }, 'empty_events'],
    [{ url: 'https://127.0.0.1/b', events: [] }, 'empty_events'],
    [{ url: 'https://127.0.0.1/c', events: ['customer.created', 'customer.exploded'] }, 'unknown_event_type'],
    [{ url: 'https://127.0.0.1/d', events: ['customer.created'], rotation_grace_minutes: -1 }, 'invalid_rotation_grace'],
    [{ url: 'https://127.0.0.1/e', events: ['customer.created'], rotation_grace_minutes: 10_081 }, 'invalid_rotation_grace'],
    [{ url: 'https://127.0.0.1/f', events: ['customer.created'], rotation_grace_minutes: 1.5 }, 'invalid_rotation_grace'],
    [{ url: 'https://127.0.0.1/g', events: ['customer.created'], rotation_grace_minutes: '60' }, 'invalid_rotation_grace'],
    [{ url: 'https://127.0.0.1/h', events: ['customer.created'], colour: 'blue' }, 'invalid_request'],
  ])('400 for %j: %s', async (body, code) => {
    expectError(await post('/v1/webhooks', body), 400, code);
  });

  it('409 webhook_url_in_use for the same url twice (also after normalization), but another developer may use it', async () => {
    const url = `${receiver.origin}/same-${++urlCount}`;
    await register(developer.key, url);
    expectError(await post('/v1/webhooks', { url, events: ['wallet.low'] }), 409, 'webhook_url_in_use');
    expectError(await post('/v1/webhooks', { url: url.replace('https://', 'HTTPS://'), events: ['wallet.low'] }), 409, 'webhook_url_in_use');
    const other = await createDeveloper(gateway.platform, { scopes: ['api:webhooks'] });
    expect((await post('/v1/webhooks', { url, events: ['wallet.low'] }, other.key)).status).toBe(200);
  });

  it('needs the api:webhooks scope', async () => {
    const reader = await createDeveloper(gateway.platform, { scopes: ['api:read'] });
    expectError(await post('/v1/webhooks', { url: freshUrl(), events: ['customer.created'] }, reader.key), 403, 'insufficient_scope');
    expectError(await get('/v1/webhooks', reader.key), 403, 'insufficient_scope');
  });
});

describe('the second registration form, POST /v1/webhook_endpoints', () => {
  it('returns id and the secret once', async () => {
    const response = await post('/v1/webhook_endpoints', { url: freshUrl('second-form'), events: ['customer.created'], description: 'from the reference form' });
    expect(response.status).toBe(200);
    expect(response.body.id).toMatch(/^wh_/);
    expect(response.body.secret).toMatch(/^whsec_/);
    expect(response.body.description).toBe('from the reference form');
  });

  it('401 invalid_api_key for a missing, malformed or unknown key', async () => {
    const body = { url: freshUrl(), events: ['customer.created'] };
    expectError(await call(gateway.baseUrl, '/v1/webhook_endpoints', { method: 'POST', json: body }), 401, 'invalid_api_key');
    expectError(await post('/v1/webhook_endpoints', body, 'ko_nope'), 401, 'invalid_api_key');
    expectError(await post('/v1/webhook_endpoints', body, `ko_${'0'.repeat(64)}`), 401, 'invalid_api_key');
  });

  it.each([[{ events: ['customer.created'] }], [{ url: '', events: ['customer.created'] }], [{ url: 'http://127.0.0.1/x', events: ['customer.created'] }], [{ url: '::::', events: ['customer.created'] }]])(
    '400 invalid_url for %j',
    async (body) => {
      expectError(await post('/v1/webhook_endpoints', body), 400, 'invalid_url');
    },
  );
});

describe('managing an endpoint', () => {
  it('PATCHes url, events, description and status (active <-> paused), and lists by status', async () => {
    const created = await register(developer.key, freshUrl());
    const newUrl = freshUrl('moved');
    const changed = await patch(`/v1/webhooks/${created.id}`, { url: newUrl, events: ['wallet.low', 'wallet.empty'], description: 'renamed' });
    expect(changed.status).toBe(200);
    expect(changed.body).toMatchObject({ url: newUrl, events: ['wallet.low', 'wallet.empty'], description: 'renamed', status: 'active' });
    expect(changed.body).not.toHaveProperty('secret');

    expect((await patch(`/v1/webhooks/${created.id}`, { status: 'paused' })).body.status).toBe('paused');
    const paused = await get('/v1/webhooks?status=paused&limit=100');
    expect(paused.body.data.map((endpoint: any) => endpoint.id)).toContain(created.id);
    expect(paused.body.data.every((endpoint: any) => endpoint.status === 'paused')).toBe(true);
    const active = await get('/v1/webhooks?status=active&limit=100');
    expect(active.body.data.map((endpoint: any) => endpoint.id)).not.toContain(created.id);
    expect((await patch(`/v1/webhooks/${created.id}`, { status: 'active' })).body.status).toBe('active');

    expectError(await get('/v1/webhooks?status=deleted'), 400, 'invalid_request');
  });

  it('400 invalid_status_transition for any status but active and paused, 400 empty_patch, and the url rules on PATCH', async () => {
    const created = await register(developer.key, freshUrl());
    const taken = await register(developer.key, freshUrl());
    expectError(await patch(`/v1/webhooks/${created.id}`, { status: 'disabled_after_failures' }), 400, 'invalid_status_transition');
    expectError(await patch(`/v1/webhooks/${created.id}`, { status: 'deleted' }), 400, 'invalid_status_transition');
    expectError(await patch(`/v1/webhooks/${created.id}`, {}), 400, 'empty_patch');
    expectError(await patch(`/v1/webhooks/${created.id}`, { url: 'http://127.0.0.1/x' }), 400, 'insecure_webhook_url');
    expectError(await patch(`/v1/webhooks/${created.id}`, { url: taken.url }), 409, 'webhook_url_in_use');
    expectError(await patch(`/v1/webhooks/${created.id}`, { events: [] }), 400, 'empty_events');
    expectError(await patch(`/v1/webhooks/${created.id}`, { events: ['nope.nothing'] }), 400, 'unknown_event_type');
    expectError(await patch(`/v1/webhooks/${created.id}`, { rotation_grace_minutes: 99_999 }), 400, 'invalid_rotation_grace');
  });

  it('DELETE answers 204, then the endpoint is 404 not_found; another developer sees 404 for any of it', async () => {
    const created = await register(developer.key, freshUrl());
    const stranger = await createDeveloper(gateway.platform, { scopes: ['api:webhooks'] });
    for (const response of [
      await get(`/v1/webhooks/${created.id}`, stranger.key),
      await patch(`/v1/webhooks/${created.id}`, { status: 'paused' }, stranger.key),
      await post(`/v1/webhooks/${created.id}/rotate_secret`, {}, stranger.key),
      await post(`/v1/webhooks/${created.id}/test`, {}, stranger.key),
      await get(`/v1/webhooks/${created.id}/deliveries`, stranger.key),
      await del(`/v1/webhooks/${created.id}`, stranger.key),
    ]) {
      expectError(response, 404, 'not_found');
    }
    const deleted = await del(`/v1/webhooks/${created.id}`);
    expect(deleted.status).toBe(204);
    expect(deleted.text).toBe('');
    expectError(await get(`/v1/webhooks/${created.id}`), 404, 'not_found');
    expectError(await del(`/v1/webhooks/${created.id}`), 404, 'not_found');
    expectError(await get('/v1/webhooks/wh_doesnotexist'), 404, 'not_found');
  });

  it('rotate_secret returns a new secret once and opens the grace window; the grace is range checked', async () => {
    const created = await register(developer.key, freshUrl(), ['customer.created'], { rotation_grace_minutes: 30 });
    expectError(await post(`/v1/webhooks/${created.id}/rotate_secret`, { rotation_grace_minutes: 10_081 }), 400, 'invalid_rotation_grace');
    expectError(await post(`/v1/webhooks/${created.id}/rotate_secret`, { rotation_grace_minutes: 'soon' }), 400, 'invalid_rotation_grace');
    const rotated = await post(`/v1/webhooks/${created.id}/rotate_secret`, {});
    expect(rotated.status).toBe(200);
    expect(rotated.body.secret).toMatch(/^whsec_/);
    expect(rotated.body.secret).not.toBe(created.secret);
    const expires = Date.parse(rotated.body.previous_secret_expires_at);
    expect(expires).toBeGreaterThan(Date.now() + 25 * 60_000);
    expect(expires).toBeLessThan(Date.now() + 35 * 60_000);
    expect((await get(`/v1/webhooks/${created.id}`)).body).not.toHaveProperty('secret');
  });

  it('retry: 404 not_found for an unknown delivery', async () => {
    const created = await register(developer.key, freshUrl());
    expectError(await post(`/v1/webhooks/${created.id}/deliveries/whdel_unknown/retry`, {}), 404, 'not_found');
  });
});

describe('delivery', () => {
  it('signs a customer.created delivery so the README verification passes, with the envelope and id headers', async () => {
    const dev = await createDeveloper(gateway.platform);
    const endpoint = await register(dev.key, freshUrl('signed'));
    const customer = await post('/v1/customers', { external_id: 'signed-1' }, dev.key);
    expect(customer.status).toBe(200);

    const [request] = await receiver.waitFor(() => onPath(pathOf(endpoint.url)).length >= 1).then(() => onPath(pathOf(endpoint.url)));
    const body = envelope(request!);
    expect(body).toMatchObject({ object: 'event', type: 'customer.created', api_version: 'v1', data: { customer: { id: customer.body.id, external_id: 'signed-1' } } });
    expect(body.id).toMatch(/^evt_/);
    expect(Number.isInteger(body.created)).toBe(true);
    expect(header(request!, 'X-Svc-Event-Id')).toBe(body.id);
    expect(header(request!, 'X-Svc-Event-Type')).toBe('customer.created');
    expect(header(request!, 'X-Svc-Delivery-Id')).toMatch(/^whdel_/);
    expect(header(request!, 'Content-Type')).toBe('application/json');
    const signature = header(request!, 'X-Svc-Signature')!;
    expect(signature).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    expect(verifySvcSignature(request!.rawBody, signature, endpoint.secret)).toBe(true);
    expect(verifySvcSignature(request!.rawBody, signature, 'whsec_wrong')).toBe(false);
    expect(verifySvcSignature(request!.rawBody.replace('signed-1', 'signed-2'), signature, endpoint.secret)).toBe(false);
    expect(verifySvcSignature(request!.rawBody, signature, endpoint.secret, -1)).toBe(false);

    const [delivery] = await eventually(() => deliveriesOf(dev.key, endpoint.id), (list) => list[0]?.status === 'succeeded');
    expect(delivery).toMatchObject({ event_id: body.id, event_type: 'customer.created', status: 'succeeded', attempt_count: 1, response_status: 200 });
    expect(delivery.attempts).toEqual([expect.objectContaining({ attempt: 1, response_status: 200, error: null })]);
    const refreshed = await eventually(() => get(`/v1/webhooks/${endpoint.id}`, dev.key), (response) => response.body.last_success_at !== null);
    expect(refreshed.body.failure_streak).toBe(0);
  });

  it('carries two v1 digests during a rotation grace window (old and new secret both verify), one after a rotation without grace', async () => {
    const dev = await createDeveloper(gateway.platform);
    const endpoint = await register(dev.key, freshUrl('rotating'));
    const path = pathOf(endpoint.url);

    const graceful = await post(`/v1/webhooks/${endpoint.id}/rotate_secret`, { rotation_grace_minutes: 60 }, dev.key);
    await post('/v1/customers', { external_id: 'during-grace' }, dev.key);
    await receiver.waitFor(() => onPath(path).length >= 1);
    const during = onPath(path)[0]!;
    const duringHeader = header(during, 'X-Svc-Signature')!;
    expect(duringHeader).toMatch(/^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/);
    expect(verifySvcSignature(during.rawBody, duringHeader, graceful.body.secret)).toBe(true);
    expect(verifySvcSignature(during.rawBody, duringHeader, endpoint.secret)).toBe(true);

    const abrupt = await post(`/v1/webhooks/${endpoint.id}/rotate_secret`, { rotation_grace_minutes: 0 }, dev.key);
    expect(abrupt.body.previous_secret_expires_at).toBeNull();
    await post('/v1/customers', { external_id: 'after-grace' }, dev.key);
    await receiver.waitFor(() => onPath(path).length >= 2);
    const after = onPath(path)[1]!;
    const afterHeader = header(after, 'X-Svc-Signature')!;
    expect(afterHeader).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    expect(verifySvcSignature(after.rawBody, afterHeader, abrupt.body.secret)).toBe(true);
    expect(verifySvcSignature(after.rawBody, afterHeader, graceful.body.secret)).toBe(false);
    expect(verifySvcSignature(after.rawBody, afterHeader, endpoint.secret)).toBe(false);
  });

  it('sends an event only to active endpoints subscribed to its type, once each', async () => {
    const dev = await createDeveloper(gateway.platform);
    const subscribed = await register(dev.key, freshUrl('sub'));
    const paused = await register(dev.key, freshUrl('paused'));
    const elsewhere = await register(dev.key, freshUrl('other-type'), ['wallet.low']);
    await patch(`/v1/webhooks/${paused.id}`, { status: 'paused' }, dev.key);
    const event = await recordEvent(gateway.platform.db, dev.accountId, 'customer.created', { note: 'fan-out' });

    await receiver.waitFor(() => onPath(pathOf(subscribed.url)).length >= 1);
    await eventually(
      async () => (await gateway.platform.db.query('SELECT relayed_at FROM outbox_events WHERE id = $1', [event.id])).rows[0].relayed_at,
      (relayedAt) => relayedAt !== null,
    );
    const { rows } = await gateway.platform.db.query('SELECT endpoint_id FROM webhook_deliveries WHERE event_id = $1', [event.id]);
    expect(rows).toEqual([{ endpoint_id: subscribed.id }]);
    expect(onPath(pathOf(paused.url))).toEqual([]);
    expect(onPath(pathOf(elsewhere.url))).toEqual([]);
  });

  it('POST .../test sends webhook.test now, to that endpoint only, and the deliveries list shows it with its response status', async () => {
    const dev = await createDeveloper(gateway.platform);
    const endpoint = await register(dev.key, freshUrl('test-event'), ['wallet.low']);
    const bystander = await register(dev.key, freshUrl('bystander'), ['webhook.test']);
    const sent = await post(`/v1/webhooks/${endpoint.id}/test`, {}, dev.key);
    expect(sent.status).toBe(200);
    expect(sent.body).toMatchObject({ object: 'webhook_delivery', webhook_endpoint_id: endpoint.id, event_type: 'webhook.test', status: 'pending' });

    await receiver.waitFor(() => onPath(pathOf(endpoint.url)).length >= 1);
    const body = envelope(onPath(pathOf(endpoint.url))[0]!);
    expect(body).toMatchObject({ id: sent.body.event_id, type: 'webhook.test', data: { webhook_endpoint_id: endpoint.id } });
    const [delivery] = await eventually(() => deliveriesOf(dev.key, endpoint.id), (list) => list[0]?.status === 'succeeded');
    expect(delivery).toMatchObject({ id: sent.body.id, response_status: 200, attempts: [expect.objectContaining({ response_status: 200 })] });
    expect(await deliveriesOf(dev.key, bystander.id)).toEqual([]);
  });

  it('a receiver that fails three times receives the event on the fourth attempt, from a Temporal retry workflow', async () => {
    const dev = await createDeveloper(gateway.platform);
    const endpoint = await register(dev.key, freshUrl('flaky'));
    const path = pathOf(endpoint.url);
    receiver.on(path, (_request, seen) => (seen <= 3 ? 500 : 200));
    await post('/v1/customers', { external_id: 'flaky' }, dev.key);

    await receiver.waitFor(() => onPath(path).length >= 4);
    const received = onPath(path);
    expect(received.map((request) => request.answered)).toEqual([500, 500, 500, 200]);
    expect(new Set(received.map((request) => envelope(request).id)).size).toBe(1);
    expect(new Set(received.map((request) => request.rawBody)).size).toBe(1);
    expect(received.map((request) => header(request, 'X-Svc-Delivery-Attempt'))).toEqual(['1', '2', '3', '4']);
    for (const request of received) expect(verifySvcSignature(request.rawBody, header(request, 'X-Svc-Signature'), endpoint.secret)).toBe(true);

    const [delivery] = await eventually(() => deliveriesOf(dev.key, endpoint.id), (list) => list[0]?.status === 'succeeded');
    expect(delivery.attempt_count).toBe(4);
    expect(delivery.attempts.map((attempt: any) => attempt.response_status)).toEqual([500, 500, 500, 200]);
    const handle = gateway.platform.temporal.client.workflow.getHandle(`webhook-delivery-${delivery.id}`);
    expect(await handle.result()).toBe('succeeded');
    expect((await handle.describe()).status.name).toBe('COMPLETED');
    expect((await get(`/v1/webhooks/${endpoint.id}`, dev.key)).body.failure_streak).toBe(0);
  });

  it('a receiver that keeps failing drives its endpoint to disabled_after_failures; re-enabled by PATCH, a dead delivery replays', async () => {
    const dev = await createDeveloper(gateway.platform);
    const endpoint = await register(dev.key, freshUrl('down'));
    const path = pathOf(endpoint.url);
    let healthy = false;
    receiver.on(path, () => (healthy ? 200 : 503));
    await post('/v1/customers', { external_id: 'down-1' }, dev.key);

    const disabled = await eventually(() => get(`/v1/webhooks/${endpoint.id}`, dev.key), (response) => response.body.status === 'disabled_after_failures');
    expect(disabled.body.failure_streak).toBe(4);
    expect(disabled.body.last_failure_at).not.toBeNull();
    const [dead] = await eventually(() => deliveriesOf(dev.key, endpoint.id), (list) => list[0]?.status === 'dead');
    expect(dead.attempt_count).toBe(4);
    expect(dead.last_error).toMatch(/disabled_after_failures/);
    expect((await get(`/v1/webhooks/${endpoint.id}/deliveries?status=dead`, dev.key)).body.data.map((item: any) => item.id)).toEqual([dead.id]);
    expect((await get(`/v1/webhooks/${endpoint.id}/deliveries?status=succeeded`, dev.key)).body.data).toEqual([]);
    expectError(await get(`/v1/webhooks/${endpoint.id}/deliveries?status=lost`, dev.key), 400, 'invalid_request', { param: 'status' });
    expect((await get(`/v1/webhooks?status=disabled_after_failures`, dev.key)).body.data.map((item: any) => item.id)).toEqual([endpoint.id]);

    // Events of a disabled endpoint make no delivery.
    const skipped = await recordEvent(gateway.platform.db, dev.accountId, 'customer.created', { note: 'while disabled' });
    await eventually(
      async () => (await gateway.platform.db.query('SELECT relayed_at FROM outbox_events WHERE id = $1', [skipped.id])).rows[0].relayed_at,
      (relayedAt) => relayedAt !== null,
    );
    expect((await deliveriesOf(dev.key, endpoint.id)).map((delivery) => delivery.id)).toEqual([dead.id]);

    expectError(await patch(`/v1/webhooks/${endpoint.id}`, { status: 'paused' }, dev.key), 400, 'invalid_status_transition');
    const reenabled = await patch(`/v1/webhooks/${endpoint.id}`, { status: 'active' }, dev.key);
    expect(reenabled.body).toMatchObject({ status: 'active', failure_streak: 0 });

    healthy = true;
    const replay = await post(`/v1/webhooks/${endpoint.id}/deliveries/${dead.id}/retry`, {}, dev.key);
    expect(replay.status).toBe(200);
    expect(replay.body).toMatchObject({ id: dead.id, status: 'replayed', replay_count: 1 });
    const [replayed] = await eventually(() => deliveriesOf(dev.key, endpoint.id), (list) => list[0]?.status === 'succeeded');
    expect(replayed.attempt_count).toBe(5);
    expect(onPath(path).at(-1)!.answered).toBe(200);
    expect(new Set(onPath(path).map((request) => envelope(request).id)).size).toBe(1);

    expectError(await post(`/v1/webhooks/${endpoint.id}/deliveries/${dead.id}/retry`, {}, dev.key), 409, 'delivery_not_retryable');
  });

  it('does not follow redirects, and a response after the timeout is a failure', async () => {
    const dev = await createDeveloper(gateway.platform);
    const moved = await register(dev.key, freshUrl('moved'));
    const slow = await register(dev.key, freshUrl('slow'));
    receiver.on(pathOf(moved.url), () => 302);
    receiver.on(pathOf(slow.url), async () => {
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      return 200;
    });
    await post(`/v1/webhooks/${moved.id}/test`, {}, dev.key);
    await post(`/v1/webhooks/${slow.id}/test`, {}, dev.key);

    const [redirected] = await eventually(() => deliveriesOf(dev.key, moved.id), (list) => list[0]?.status === 'dead');
    expect(redirected).toMatchObject({ response_status: 302, attempt_count: 1 });
    expect(onPath('/redirected')).toEqual([]);
    const [timedOut] = await eventually(() => deliveriesOf(dev.key, slow.id), (list) => list[0]?.status === 'dead');
    expect(timedOut.response_status).toBeNull();
    expect(timedOut.last_error).toMatch(/no response within 2000 ms/);
  });

  it('concurrent relays make exactly one delivery per event and endpoint', async () => {
    const dev = await createDeveloper(gateway.platform);
    const first = await register(dev.key, freshUrl('relay-a'));
    const second = await register(dev.key, freshUrl('relay-b'));
    const events = [];
    for (let i = 0; i < 60; i++) events.push(await recordEvent(gateway.platform.db, dev.accountId, 'customer.created', { i }));
    // The worker's own relay runs too; these race it and each other.
    await Promise.all(Array.from({ length: 4 }, () => relayOutbox(gateway.platform)));
    await receiver.waitFor(() => onPath(pathOf(first.url)).length >= 60 && onPath(pathOf(second.url)).length >= 60);
    const { rows } = await gateway.platform.db.query(
      'SELECT endpoint_id, count(*)::int AS deliveries, count(DISTINCT event_id)::int AS events FROM webhook_deliveries WHERE developer_id = $1 GROUP BY endpoint_id ORDER BY endpoint_id',
      [dev.accountId],
    );
    expect(rows).toEqual(
      [first.id, second.id].sort().map((endpointId) => ({ endpoint_id: endpointId, deliveries: 60, events: 60 })),
    );
    expect(new Set(onPath(pathOf(first.url)).map((request) => envelope(request).id))).toEqual(new Set(events.map((event) => event.id)));
  });
});

describe('waking the relay', () => {
  it('notifies at commit only for statements that recorded an event, not for every statement that could have', async () => {
    const dev = await createDeveloper(gateway.platform);
    const listener = new pg.Client({ connectionString: gateway.env.DATABASE_URL });
    await listener.connect();
    const writer = await gateway.platform.db.connect();
    try {
      const heard: Array<{ channel: string; pid: number }> = [];
      let probeHeard!: () => void;
      const probe = new Promise<void>((resolve) => (probeHeard = resolve));
      listener.on('notification', ({ channel, processId }) => {
        heard.push({ channel, pid: processId });
        if (channel === 'outbox_probe') probeHeard();
      });
      await listener.query('LISTEN outbox_events');
      await listener.query('LISTEN outbox_probe');
      const { rows } = await writer.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');

      // Most metering statements carry an insert of the events they may raise, and raise none.
      await writer.query(`INSERT INTO outbox_events (id, developer_id, type, data) SELECT 'evt_none', $1, 'wallet.low', '{}' WHERE false`, [dev.accountId]);
      await recordEvent(writer, dev.accountId, 'wallet.empty', { wallet: 'test' });
      // Notifications arrive in commit order: once this one is heard, any earlier one has been.
      await writer.query(`SELECT pg_notify('outbox_probe', '')`);
      await probe;
      expect(heard.filter((heardOne) => heardOne.pid === rows[0]!.pid).map((heardOne) => heardOne.channel)).toEqual(['outbox_events', 'outbox_probe']);
    } finally {
      writer.release();
      await listener.end();
    }
  });
});

describe('recording attempts in batches (the delivery consumer groups its writes)', () => {
  it('keeps the streak of the failures after the last success, disables at the threshold, and ignores a stale duplicate', async () => {
    const dev = await createDeveloper(gateway.platform);
    const endpoint = await register(dev.key, freshUrl('batched'), ['wallet.low']);
    const db = gateway.platform.db;
    // wallet.empty: no subscriber, so the worker's relay leaves these deliveries to this test.
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      const event = await recordEvent(db, dev.accountId, 'wallet.empty', { i });
      ids.push(...(await insertDeliveries(db, [{ id: `whdel_batch${i}_${urlCount}`, event_id: event.id, endpoint_id: endpoint.id, developer_id: dev.accountId, type: 'wallet.empty' }])));
    }
    const outcome = (id: string, ok: boolean) => ({
      deliveryId: id, expectedStatus: 'pending' as const, nextStatus: ok ? ('succeeded' as const) : ('dead' as const), nextAttemptAt: null,
      ok, responseStatus: ok ? 200 : 500, error: ok ? null : 'the receiver answered 500', durationMs: 3,
    });
    const streak = async () => (await db.query('SELECT failure_streak, status, last_success_at, last_failure_at FROM webhook_endpoints WHERE id = $1', [endpoint.id])).rows[0];

    const first = await recordAttempts(db, [outcome(ids[0]!, false), outcome(ids[1]!, true), outcome(ids[2]!, false), outcome(ids[3]!, false)], 4);
    expect(first.map((row) => row.deliveryId).sort()).toEqual(ids.slice(0, 4).sort());
    expect(await streak()).toMatchObject({ failure_streak: 2, status: 'active', last_success_at: expect.any(Date), last_failure_at: expect.any(Date) });

    // A job that ran twice: the second record finds the delivery no longer pending and changes nothing.
    expect(await recordAttempts(db, [outcome(ids[1]!, false)], 4)).toEqual([]);
    expect((await streak()).failure_streak).toBe(2);

    await recordAttempts(db, [outcome(ids[4]!, false), outcome(ids[5]!, false)], 4);
    expect(await streak()).toMatchObject({ failure_streak: 4, status: 'disabled_after_failures' });
    const { rows } = await db.query('SELECT delivery_id, attempt, response_status FROM webhook_delivery_attempts WHERE delivery_id = ANY ($1) ORDER BY delivery_id', [ids]);
    expect(rows).toHaveLength(6);
  });
});

describe('SSRF guard with WEBHOOK_ALLOW_PRIVATE_HOSTS off (the default)', () => {
  let guarded: TestPlatform;
  let guardedDeveloper: TestDeveloper;
  beforeAll(async () => {
    guarded = await startTestPlatform({ WEBHOOK_ALLOW_PRIVATE_HOSTS: 'false' });
    guardedDeveloper = await createDeveloper(guarded.platform, { scopes: ['api:webhooks'] });
  });
  afterAll(() => guarded?.close());

  it.each([
    'https://127.0.0.1/hook',
    'https://localhost/hook',
    'https://10.0.0.8/hook',
    'https://172.16.3.4/hook',
    'https://192.168.1.1/hook',
    'https://169.254.169.254/latest/meta-data/',
    'https://100.64.0.1/hook',
    'https://0.0.0.0/hook',
    'https://224.0.0.1/hook',
    'https://[::1]/hook',
    'https://[fd00:ec2::254]/hook',
    'https://[fe80::1]/hook',
    'https://[::ffff:127.0.0.1]/hook',
    'https://2130706433/hook',
  ])('refuses %s with 400 malformed_webhook_url (invalid_url on the second form)', async (url) => {
    const headers = bearer(guardedDeveloper.key);
    expectError(await call(guarded.baseUrl, '/v1/webhooks', { method: 'POST', headers, json: { url, events: ['customer.created'] } }), 400, 'malformed_webhook_url');
    expectError(await call(guarded.baseUrl, '/v1/webhook_endpoints', { method: 'POST', headers, json: { url, events: ['customer.created'] } }), 400, 'invalid_url');
  });

  it('refuses at connection time too: a host that resolves to a private address, or a literal one, is never dialled', async () => {
    const client = new DeliveryClient({ timeoutMs: 2_000, allowPrivateHosts: false, extraCaFile: receiver.caFile });
    // Counted by path: the shared receiver may meanwhile get a retry that an earlier test scheduled.
    const dialled = () => receiver.requests.filter((request) => request.path === '/rebound' || request.path === '/literal').length;
    const before = dialled();
    try {
      const byName = await client.post(`https://localhost:${receiver.port}/rebound`, '{}', {});
      expect(byName).toMatchObject({ ok: false, status: null });
      expect(byName.error).toMatch(/unsafe address 127\.0\.0\.1/);
      const byAddress = await client.post(`${receiver.origin}/literal`, '{}', {});
      expect(byAddress).toMatchObject({ ok: false, status: null });
      expect(byAddress.error).toMatch(/unsafe address/);
    } finally {
      client.close();
    }
    expect(dialled()).toBe(before);

    // The same client with the switch on reaches the receiver (the test's own certificate is trusted).
    const open = new DeliveryClient({ timeoutMs: 2_000, allowPrivateHosts: true, extraCaFile: receiver.caFile });
    try {
      expect(await open.post(`https://localhost:${receiver.port}/reachable`, '{}', {})).toMatchObject({ ok: true, status: 200 });
    } finally {
      open.close();
    }
  });
});
