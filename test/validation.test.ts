import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { ServiceError } from '../shared/errors.js';
import { parseBody, parseWith, refuse, withErrorCode } from '../shared/validation.js';

const body = z.strictObject({
  rpm_limit: withErrorCode(z.number().int().positive().nullable(), 'invalid_rpm_limit').optional(),
  scope: withErrorCode(z.array(z.enum(['chat', 'embeddings'])).min(1), 'invalid_scope').optional(),
  name: z.string().max(5).optional(),
  nested: z.object({ deep: z.array(z.number()) }).optional(),
});

function failure(run: () => unknown): ServiceError {
  try {
    run();
  } catch (error) {
    if (error instanceof ServiceError) return error;
    throw error;
  }
  throw new Error('expected a ServiceError');
}

/** The one translation of a zod failure into the spec's error (shared/validation.ts). */
describe('validation', () => {
  it('names a part of the request by where it sits in the whole (one chat message of many)', () => {
    const message = z.object({ role: z.enum(['user', 'assistant']), name: withErrorCode(z.string(), 'invalid_scope').optional() });
    const plain = failure(() => parseWith(message, { role: 'robot' }, ['messages', 3]));
    expect({ code: plain.code, param: plain.param }).toEqual({ code: 'invalid_request', param: 'messages.3.role' });
    expect(plain.message).toMatch(/^messages\.3\.role: /);
    const coded = failure(() => parseWith(message, { role: 'user', name: 7 }, ['messages', 0]));
    expect({ code: coded.code, param: coded.param }).toEqual({ code: 'invalid_scope', param: 'messages.0.name' });
  });

  it('gives a coded field its own code, with the field (not the array item) as param', () => {
    expect(failure(() => parseWith(body, { rpm_limit: 0 }))).toMatchObject({ code: 'invalid_rpm_limit', param: 'rpm_limit', status: 400 });
    expect(failure(() => parseWith(body, { scope: ['chat', 'admin'] }))).toMatchObject({ code: 'invalid_scope', param: 'scope' });
  });

  it('names the path of an uncoded failure in param and message', () => {
    const error = failure(() => parseWith(body, { nested: { deep: [1, 'x'] } }));
    expect(error).toMatchObject({ code: 'invalid_request', param: 'nested.deep.1' });
    expect(error.message).toMatch(/^nested\.deep\.1: /);
  });

  it('refuses an unknown field by name, and a body that is not an object', () => {
    expect(failure(() => parseWith(body, { nmae: 'x' }))).toMatchObject({ code: 'invalid_request', param: 'nmae', message: 'Unrecognized request field: nmae.' });
    expect(failure(() => parseBody(body, [1]))).toMatchObject({ code: 'invalid_request', message: 'The request body must be a JSON object.' });
    expect(failure(() => parseBody(body, undefined)).code).toBe('invalid_request');
  });

  it('gives a refusal its own code, message and param, before the code of the field it is in', () => {
    const link = withErrorCode(
      z.string().transform((value, ctx) => (value.startsWith('https:') ? value : value.includes(':') ? refuse(ctx, 'insecure_webhook_url') : refuse(ctx, 'malformed_webhook_url', 'not a URL'))),
      'invalid_url',
    );
    const form = z.strictObject({ link, links: z.array(link).optional() });
    expect(failure(() => parseWith(form, { link: 'http://x' }))).toMatchObject({ code: 'insecure_webhook_url', param: 'link', message: 'url must use https.' });
    expect(failure(() => parseWith(form, { link: 'x' }))).toMatchObject({ code: 'malformed_webhook_url', param: 'link', message: 'not a URL' });
    expect(failure(() => parseWith(form, { link: 42 }))).toMatchObject({ code: 'invalid_url', param: 'link' });
    expect(failure(() => parseWith(form, { link: 'https:a', links: ['https:b', 'ftp:c'] }))).toMatchObject({ code: 'insecure_webhook_url', param: 'links.1' });
    expect(parseWith(form, { link: 'https:a' })).toEqual({ link: 'https:a' });
  });

  it('returns the parsed value when it is valid', () => {
    expect(parseBody(body, { rpm_limit: null, scope: ['chat'] })).toEqual({ rpm_limit: null, scope: ['chat'] });
  });
});
