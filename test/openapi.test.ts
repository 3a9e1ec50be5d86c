import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createGatewayApp } from '../api/app.js';
import { openApiPath } from '../shared/compatibility/surfaces.js';
import { mountedRoutes } from './support/mounted-routes.js';
import { call, startTestPlatform, type TestPlatform } from './support/test-platform.js';

let gateway: TestPlatform;
let document: any;
beforeAll(async () => {
  gateway = await startTestPlatform();
  const response = await call(gateway.baseUrl, '/v1/openapi.json');
  expect(response.status).toBe(200);
  document = response.body;
});
afterAll(() => gateway?.close());

describe('GET /v1/openapi.json', () => {
  it('is an OpenAPI 3.1 document with the error envelope as a shared component', () => {
    expect(document.openapi).toBe('3.1.0');
    expect(document.info).toMatchObject({ title: expect.any(String), version: expect.any(String) });
    const envelope = document.components.schemas.ErrorEnvelope;
    expect(envelope.properties.error.required).toEqual(expect.arrayContaining(['type', 'code', 'message']));
    expect(envelope.properties.error.properties.code.enum).toEqual(expect.arrayContaining(['invalid_request', 'insufficient_scope', 'customer_rate_limit_exceeded']));
    expect(document.components.responses.Error.content['application/json'].schema).toEqual({ $ref: '#/components/schemas/ErrorEnvelope' });
  });

  it('describes the Brain headers of chat completions and the Brain-Status they answer with', () => {
    const chat = document.paths['/v1/chat/completions'].post;
    const headers = chat.parameters.filter((parameter: any) => parameter.in === 'header').map((parameter: any) => parameter.name);
    expect(headers).toEqual(['brain', 'brain-scope', 'brain-trust', 'brain-subtree', 'brain-learn']);
    expect(chat.responses['200'].headers['Brain-Status'].description).toContain('attached:empty_recall');
  });

  it('describes every mounted /v1 route, each with the error envelope and its security', () => {
    const mounted = mountedRoutes(createGatewayApp(gateway.platform)).filter((route) => route.path.startsWith('/v1/'));
    for (const route of mounted) {
      const operation = document.paths[openApiPath(route.path)]?.[route.method];
      expect(operation, `${route.method} ${route.path}`).toBeDefined();
      expect(operation.responses.default).toEqual({ $ref: '#/components/responses/Error' });
      expect(Array.isArray(operation.security)).toBe(true);
      for (const name of route.path.match(/:(\w+)/g) ?? []) {
        expect(operation.parameters.some((parameter: any) => parameter.in === 'path' && parameter.name === name.slice(1))).toBe(true);
      }
    }
    const described = Object.values(document.paths).reduce((count: number, methods: any) => count + Object.keys(methods).length, 0);
    expect(described).toBe(mounted.length);
  });

  it('carries the request schemas the routes validate with, and they compile as JSON Schema 2020-12', () => {
    const chat = document.paths['/v1/chat/completions'].post;
    const chatBody = chat.requestBody.content['application/json'].schema;
    expect(chatBody.properties.messages.type).toBe('array');
    expect(chatBody.properties.temperature).toMatchObject({ type: 'number', minimum: 0, maximum: 2 });
    expect(chat.security).toEqual([{ developerKey: ['api:chat'] }, { clientToken: ['chat'] }]);
    const customer = document.paths['/v1/customers'].post.requestBody.content['application/json'].schema;
    expect(customer.additionalProperties).toBe(false);
    expect(Object.keys(customer.properties)).toEqual(expect.arrayContaining(['external_id', 'rpm_limit', 'metadata']));
    // A multipart route's fields come from the schema it parses them with, and its file part is described beside them.
    for (const [path, field] of [['/v1/files', 'purpose'], ['/v1/audio/transcriptions', 'response_format']] as const) {
      const form = document.paths[path].post.requestBody.content['multipart/form-data'].schema;
      expect(form.properties.file, path).toMatchObject({ type: 'string', format: 'binary' });
      expect(form.properties, path).toHaveProperty(field);
    }
    expect(document.paths['/v1/files'].get.parameters.map((parameter: any) => parameter.name)).toEqual(expect.arrayContaining(['limit', 'after']));
    expect(document.paths['/v1/health'].get.security).toEqual([]);

    const ajv = new Ajv2020({ strict: false, validateFormats: false });
    let bodies = 0;
    for (const methods of Object.values(document.paths) as any[]) {
      for (const operation of Object.values(methods) as any[]) {
        for (const content of Object.values(operation.requestBody?.content ?? {}) as any[]) {
          expect(() => ajv.compile(content.schema)).not.toThrow();
          bodies += 1;
        }
      }
    }
    expect(bodies).toBeGreaterThan(15);
    // A schema that validates requests rejects what the route rejects.
    const validChat = ajv.compile(chatBody);
    expect(validChat({ model: 'svc:openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }] })).toBe(true);
    expect(validChat({ model: 'svc:openai/gpt-4o-mini', messages: [{ role: 'user', content: 'hi' }], temperature: 3 })).toBe(false);
  });
});
