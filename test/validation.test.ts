import { z } from 'zod';
import { describe, expect, it } from 'vitest';
import { ServiceError } from '../shared/errors.js';
import { parseBody, parseWith, withErrorCode } from '../shared/validation.js';

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

  it('returns the parsed value when it is valid', () => {
    expect(parseBody(body, { rpm_limit: null, scope: ['chat'] })).toEqual({ rpm_limit: null, scope: ['chat'] });
  });
});
