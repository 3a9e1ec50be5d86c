import OpenAI, { toFile } from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sniffMediaType } from '../shared/inference/file-parts.js';
import { startEmulatedGatewayWithDeveloper, type EmulatedGateway } from './support/emulated-gateway.js';
import { bearer, call, createDeveloper, type TestDeveloper, type TestPlatform, walletBalanceMicros } from './support/test-platform.js';

/**
 * Content parts that name an uploaded file (svc_file:<id> for images, file_id for documents) are
 * resolved server side before any model call: checked for owner, size and real kind, then sent to
 * the provider inline. Refusals are never billed.
 */
let emulated: EmulatedGateway;
let gateway: TestPlatform;
let developer: TestDeveloper;
let client: OpenAI;

const PNG = Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(64, 7)]);
const PDF = Buffer.from('%PDF-1.7\n1 0 obj << >> endobj\ntrailer << >>\n%%EOF\n');

beforeAll(async () => {
  ({ emulated, gateway, developer } = await startEmulatedGatewayWithDeveloper());
  client = new OpenAI({ baseURL: `${gateway.baseUrl}/v1`, apiKey: developer.key, maxRetries: 0 });
});
afterAll(() => emulated?.close());

const upload = async (bytes: Buffer, name: string, sdk = client) => (await sdk.files.create({ file: await toFile(bytes, name), purpose: 'vision' })).id;
const chat = (content: unknown[], key = developer.key) =>
  call(gateway.baseUrl, '/v1/chat/completions', { method: 'POST', json: { model: 'svc:openai/gpt-4o-mini', messages: [{ role: 'user', content }] }, headers: bearer(key) });
const errorOf = (response: { status: number; body: any }) => ({ status: response.status, code: response.body?.error?.code, param: response.body?.error?.param });

const walletMicros = () => walletBalanceMicros(gateway.platform, developer.accountId);

describe('file references in chat content parts', () => {
  it('answers with an uploaded image (svc_file:) and an uploaded PDF (file_id)', async () => {
    const image = await upload(PNG, 'chart.png');
    const document = await upload(PDF, 'report.pdf');
    const response = await chat([
      { type: 'text', text: 'Describe both.' },
      { type: 'image_url', image_url: { url: `svc_file:${image}` } },
      { type: 'file', file: { file_id: document } },
    ]);
    expect(response.status).toBe(200);
    expect(response.body.choices[0].message.content.length).toBeGreaterThan(0);
  });

  it('refuses, unbilled, a file that is not the caller’s, one that is not of the part’s kind, and one too large', async () => {
    const before = await walletMicros();
    const stranger = await createDeveloper(gateway.platform, { scopes: ['admin'] });
    const theirs = await upload(PNG, 'theirs.png', new OpenAI({ baseURL: `${gateway.baseUrl}/v1`, apiKey: stranger.key, maxRetries: 0 }));
    const text = await upload(Buffer.from('just words, no picture'), 'fake.png');
    const big = await upload(Buffer.concat([PNG, Buffer.alloc(20 * 1024 * 1024)]), 'big.png');

    expect(errorOf(await chat([{ type: 'image_url', image_url: { url: `svc_file:${theirs}` } }]))).toEqual({ status: 400, code: 'invalid_content_part', param: 'messages.0.content' });
    expect(errorOf(await chat([{ type: 'image_url', image_url: { url: `svc_file:${text}` } }]))).toEqual({ status: 400, code: 'invalid_content_part', param: 'messages.0.content' });
    expect(errorOf(await chat([{ type: 'file', file: { file_id: await upload(PNG, 'not-a.pdf') } }]))).toEqual({ status: 400, code: 'invalid_content_part', param: 'messages.0.content' });
    expect(errorOf(await chat([{ type: 'image_url', image_url: { url: `svc_file:${big}` } }]))).toEqual({ status: 400, code: 'content_part_too_large', param: 'messages.0.content' });
    expect(await walletMicros()).toBe(before);
  });

  it('counts references toward the per-message limits', async () => {
    const image = await upload(PNG, 'one.png');
    const ref = { type: 'image_url', image_url: { url: `svc_file:${image}` } };
    expect(errorOf(await chat([ref, ref, ref]))).toEqual({ status: 400, code: 'content_part_limit_exceeded', param: 'messages.0.content' });
  });

  it('reads the kind from the bytes, not the name', () => {
    expect(sniffMediaType(PNG)).toBe('image/png');
    expect(sniffMediaType(PDF)).toBe('application/pdf');
    expect(sniffMediaType(Buffer.from([0xff, 0xd8, 0xff, 0xe0]))).toBe('image/jpeg');
    expect(sniffMediaType(Buffer.from('hello'))).toBeUndefined();
  });
});
