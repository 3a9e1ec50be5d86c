import { z } from 'zod';
import { CLIENT_TOKEN_SCOPES } from '../accounts/authenticate.js';
import { withErrorCode } from '../validation.js';

/** A mint request: each field with the code spec 1 gives its validation failure; unknown fields are refused. */
export const clientTokenMintBody = z.strictObject({
  ttl_seconds: withErrorCode(z.number().int().min(60).max(3600), 'invalid_ttl').optional(),
  scope: withErrorCode(z.array(z.enum(CLIENT_TOKEN_SCOPES)).min(1), 'invalid_scope').optional(),
  rpm_limit: withErrorCode(z.number().int().min(1).max(600), 'invalid_rpm_limit').optional(),
  origin_allowlist: withErrorCode(z.array(z.string().min(1).max(512)), 'invalid_origin_allowlist').optional(),
  bind_ip: z.boolean().optional(),
});

export type ClientTokenMintInput = z.output<typeof clientTokenMintBody>;
