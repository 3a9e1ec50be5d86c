import { z } from 'zod';
import { ROLES } from './roles.js';

/**
 * Request bodies of the hive's routes (spec 3 leaves their fields open; docs/hive.md describes
 * them). Unknown fields are refused, so a misspelt option never passes silently.
 */
const email = z.string().trim().toLowerCase().pipe(z.email()).refine((value) => value.length <= 254, 'at most 254 characters');
const password = z.string().min(12, 'at least 12 characters').max(200, 'at most 200 characters');
/** A node: its id (`nd_…`) or its name path from the organisation down (`acme/backend`). */
const nodeRef = z.string().trim().min(1).max(1_000);
const nodeName = z.string().trim().toLowerCase().regex(/^[a-z0-9][a-z0-9._-]{0,62}$/, 'lowercase letters, digits, ".", "_" and "-", at most 63, starting with a letter or digit');
const role = z.enum(ROLES);
const memoryId = z.string().regex(/^mem_[0-9A-Za-z]{24}$/, 'a memory id (mem_…)');

export const MEMORY_KINDS = ['note', 'fact', 'decision', 'preference', 'procedure', 'guardrail', 'axiom'] as const;
export type MemoryKind = (typeof MEMORY_KINDS)[number];

/** A scope inside a node: a short lowercase path such as `conventions` or `decisions/db`. */
const scope = z.string().trim().toLowerCase().regex(/^[a-z0-9][a-z0-9._/-]{0,99}$/, 'lowercase letters, digits, ".", "_", "/" and "-", at most 100');
const title = z.string().trim().min(1).max(300);
const memoryText = z.string().max(20_000);
const source = z.string().trim().min(1).max(500);

export const signupBody = z.strictObject({ email, password, organisation: nodeName });
export const passwordBody = z.strictObject({ password });
export const emptyBody = z.strictObject({});
export const nodeCreateBody = z.strictObject({ parent: nodeRef, name: nodeName });
export const tokenCreateBody = z.strictObject({
  node: nodeRef,
  role,
  name: z.string().trim().min(1).max(100).optional(),
  expires_in_days: z.number().int().min(1).max(3650).optional(),
});
export const deviceApproveBody = z.strictObject({
  code: z.string().min(1).max(20),
  email,
  node: nodeRef,
  role,
  guardrail: z.boolean().optional(),
  axiom: z.boolean().optional(),
});
export const devicePollBody = z.strictObject({ device_code: z.string().min(1).max(100) });

export const rememberBody = z.strictObject({
  node: nodeRef,
  scope: scope.default('general'),
  title,
  body: memoryText.default(''),
  kind: z.enum(MEMORY_KINDS).default('note'),
  pinned: z.boolean().optional(),
  /** Where the memory came from: a session, a file, a conversation (kept as provenance). */
  source: source.optional(),
  /** Memories this one replaces: they stay, marked superseded, and recall resolves them onto this one. */
  supersedes: z.array(memoryId).max(20).optional(),
  /** Lets a remember refine a pinned memory or one that supersedes others. */
  force: z.boolean().optional(),
});
export const memoryIdBody = z.strictObject({ id: memoryId });
export const memoryUpdateBody = z.strictObject({
  id: memoryId,
  scope: scope.optional(),
  title: title.optional(),
  body: memoryText.optional(),
  kind: z.enum(MEMORY_KINDS).optional(),
  pinned: z.boolean().optional(),
  source: source.optional(),
});
export const forgetBody = z.strictObject({ id: memoryId, force: z.boolean().optional() });
export const recallBody = z.strictObject({
  query: z.string().trim().min(1).max(2_000),
  /** Only these nodes and what lies below them (ids or name paths); all reachable nodes when absent. */
  nodes: z.array(nodeRef).min(1).max(50).optional(),
  scope: scope.optional(),
  kinds: z.array(z.enum(MEMORY_KINDS)).min(1).optional(),
  limit: z.number().int().min(1).max(50).default(10),
});
export const logBody = z.strictObject({
  node: nodeRef,
  kind: z.string().trim().toLowerCase().regex(/^[a-z0-9][a-z0-9._-]{0,39}$/, 'lowercase letters, digits, ".", "_" and "-", at most 40').default('note'),
  text: z.string().trim().min(1).max(4_000),
  data: z.record(z.string(), z.unknown()).optional(),
});
export const eventsBody = z.strictObject({
  node: nodeRef.optional(),
  kinds: z.array(z.string()).min(1).max(20).optional(),
  limit: z.number().int().min(1).max(200).default(50),
  /** Only events at or after this instant (ISO 8601). */
  since: z.iso.datetime({ offset: true }).optional(),
});

/**
 * The normalised title of a memory's identity: case, Unicode compatibility forms, runs of spaces
 * and trailing punctuation do not make a different memory ("Deploy on Fridays." = "deploy on  fridays").
 */
export function normaliseTitle(value: string): string {
  return value.normalize('NFKC').toLowerCase().replace(/\s+/g, ' ').trim().replace(/[\s.!?;:,]+$/u, '');
}
