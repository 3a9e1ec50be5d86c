import { z } from 'zod';
import { MEMORY_KINDS } from '../schemas.js';

/**
 * Request bodies of the compliance routes (POST /v1/admin/*). Unknown fields are refused, and the
 * settings record has no optional field: replacing it takes the whole record, so a partial one is
 * a 400 rather than a merge.
 */
const nodeRef = z.string().trim().min(1).max(1_000);
const scope = z.string().trim().toLowerCase().regex(/^[a-z0-9][a-z0-9._/-]{0,99}$/, 'lowercase letters, digits, ".", "_", "/" and "-", at most 100');

/** How long the route waits for the workflow's result before answering 202 with the job to poll. */
const waitSeconds = z.number().int().min(0).max(60).default(20);

export const SENSITIVITIES = ['public', 'internal', 'confidential', 'restricted'] as const;
export type Sensitivity = (typeof SENSITIVITIES)[number];

/** One retention rule: memories of this kind (any, when absent) in this scope or below it (any, when absent) go once this many days have passed since they were last written. */
export const retentionRule = z.strictObject({
  kind: z.enum(MEMORY_KINDS).optional(),
  scope: scope.optional(),
  max_age_days: z.number().int().min(1).max(36_500),
});
export type RetentionRule = z.output<typeof retentionRule>;

export const settingsRecord = z.strictObject({
  retention: z.array(retentionRule).max(100),
  sensitivity: z.enum(SENSITIVITIES),
  audit_row_days: z.number().int().min(1).max(36_500),
});
export type SettingsRecord = z.output<typeof settingsRecord>;

export const settingsBody = z.strictObject({
  node: nodeRef,
  /** The whole record to put in place of the node's; absent: read the record in force. */
  settings: settingsRecord.optional(),
});

export const retentionBody = z.strictObject({
  /** Delete what the sweep finds; without it the sweep is a dry run that names what would go. */
  apply: z.boolean().default(false),
  /** With apply: delete only what this dry run (its job id) named, of what the rules still expire. */
  from_dry_run: z.string().trim().min(1).max(300).optional(),
  wait_seconds: waitSeconds,
}).refine((body) => body.apply || body.from_dry_run === undefined, { message: 'from_dry_run applies a dry run: send apply: true with it', path: ['from_dry_run'] });

export const eraseBody = z.strictObject({
  /** The person whose writing and attribution go: an address or a person id of the caller's organisation. */
  person: z.string().trim().min(1).max(254),
  wait_seconds: waitSeconds,
});

export const holdBody = z.discriminatedUnion('action', [
  z.strictObject({ action: z.literal('place'), node: nodeRef, reason: z.string().trim().min(1).max(2_000) }),
  z.strictObject({ action: z.literal('lift'), id: z.string().regex(/^hld_[0-9A-Za-z]{24}$/, 'a hold id (hld_…)') }),
  z.strictObject({ action: z.literal('list'), include_lifted: z.boolean().default(false) }),
]);
export type HoldInput = z.output<typeof holdBody>;

export const embedBody = z.strictObject({ wait_seconds: waitSeconds });

export const jobBody = z.strictObject({ id: z.string().trim().min(1).max(300) });
