import { expect } from 'vitest';

/**
 * The one check of an error response: its status and the spec's code, in the one envelope
 * `{error:{type,code,message,param?}}` with a message a person can read; a 429 also carries
 * Retry-After. `param` is checked when the expectation names it (`{ param: undefined }`: none
 * sent), `type` when given.
 */
export function expectError(
  response: { status: number; body: any; headers?: Headers },
  status: number,
  code: string,
  expected: { param?: string; type?: string } = {},
): void {
  const error = response.body?.error;
  const checksParam = 'param' in expected;
  expect({ status: response.status, code: error?.code, ...(checksParam && { param: error?.param }), ...(expected.type && { type: error?.type }) }).toEqual({
    status,
    code,
    ...(checksParam && { param: expected.param }),
    ...(expected.type && { type: expected.type }),
  });
  expect(error.message).toEqual(expect.any(String));
  expect(error.message.length).toBeGreaterThan(0);
  if (status === 429) expect(response.headers?.get('retry-after')).toMatch(/^[1-9]\d*$/);
}
