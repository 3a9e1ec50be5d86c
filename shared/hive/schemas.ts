import { z } from 'zod';
import { instant } from '../validation.js';
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
  since: instant().optional(),
});

/**
 * The normalised title of a memory's identity: case, Unicode compatibility forms, runs of spaces
 * and trailing punctuation do not make a different memory ("Deploy on Fridays." = "deploy on  fridays").
 */
export function normaliseTitle(value: string): string {
  return value.normalize('NFKC').toLowerCase().replace(/\s+/g, ' ').trim().replace(/[\s.!?;:,]+$/u, '');
}

const taskId = z.string().regex(/^tsk_[0-9A-Za-z]{24}$/, 'a task id (tsk_…)');
const taskTitle = z.string().trim().min(1).max(300);
const note = z.string().trim().min(1).max(2_000);

/**
 * POST /v1/task: one route, the operation in `action` (spec 3 lists add, list, due, done, drop,
 * snooze as operations of one route). `assignee` is an address in the caller's organisation, or
 * `me`.
 */
export const taskBody = z.discriminatedUnion('action', [
  z.strictObject({
    action: z.literal('add'),
    node: nodeRef,
    title: taskTitle,
    body: z.string().max(20_000).default(''),
    /** When it falls due (ISO 8601); a task without one is never due, only open. */
    due: instant().optional(),
    assignee: z.union([z.literal('me'), email]).optional(),
    /** The memory the task is about. */
    memory: memoryId.optional(),
  }),
  z.strictObject({
    action: z.literal('list'),
    node: nodeRef.optional(),
    status: z.enum(['open', 'done', 'dropped', 'all']).default('open'),
    assignee: z.union([z.literal('me'), email]).optional(),
    limit: z.number().int().min(1).max(200).default(50),
  }),
  z.strictObject({
    action: z.literal('due'),
    node: nodeRef.optional(),
    /** Also what falls due within this many hours from now (0: due now or overdue). */
    within_hours: z.number().min(0).max(24 * 365).default(0),
    assignee: z.union([z.literal('me'), email]).optional(),
    limit: z.number().int().min(1).max(200).default(50),
  }),
  z.strictObject({ action: z.literal('done'), id: taskId, note: note.optional() }),
  z.strictObject({ action: z.literal('drop'), id: taskId, note: note.optional() }),
  z.strictObject({
    action: z.literal('snooze'),
    id: taskId,
    /** Falls due again at this instant, or this many hours from now; one of the two. */
    until: instant().optional(),
    hours: z.number().positive().max(24 * 365).optional(),
  }).refine((value) => (value.until === undefined) !== (value.hours === undefined), { message: 'give one of until or hours', path: ['until'] }),
]);
export type TaskInput = z.output<typeof taskBody>;

export const briefBody = z.strictObject({
  node: nodeRef,
  /** The brief's size in tokens (about four characters each); what does not fit is named under `cut`. */
  budget_tokens: z.number().int().min(100).max(100_000).default(2_000),
  /** Open a session the brief starts (its id comes back for /v1/session/end); true unless said. */
  session: z.boolean().default(true),
});
export const sessionEndBody = z.strictObject({
  session: z.string().regex(/^ses_[0-9A-Za-z]{24}$/, 'a session id (ses_…)'),
  summary: z.string().trim().min(1).max(4_000).optional(),
});

const traitText = z.string().trim().min(1).max(500);
const evidence = z.strictObject({
  text: z.string().trim().min(1).max(2_000),
  memory: memoryId.optional(),
  event: z.string().regex(/^evt_[0-9A-Za-z]{24}$/, 'an event id (evt_…)').optional(),
  source: source.optional(),
});
/** POST /v1/traits: the user model of the token's person; `list` unless an action is given. */
export const traitsBody = z.preprocess((value) => (value && typeof value === 'object' && !('action' in value) ? { ...value, action: 'list' } : value), z.discriminatedUnion('action', [
  z.strictObject({ action: z.literal('list') }),
  z.strictObject({ action: z.literal('add'), trait: traitText, evidence }),
  z.strictObject({ action: z.literal('drop'), id: z.string().regex(/^trt_[0-9A-Za-z]{24}$/, 'a trait id (trt_…)') }),
]));
export type TraitsInput = z.output<typeof traitsBody>;

/** Export: one project or one organisation (or any node the credential reaches, with what lies below). */
export const exportBody = z.strictObject({ node: nodeRef });
export const snapshotBody = z.strictObject({
  node: nodeRef.optional(),
  scope: scope.optional(),
  /** Memories shown per scope (the rest counted). */
  per_scope: z.number().int().min(1).max(100).default(20),
});
export const reportBody = z.strictObject({ node: nodeRef.optional() });
export const coverageBody = z.strictObject({
  subject: z.string().trim().min(1).max(2_000),
  node: nodeRef.optional(),
  limit: z.number().int().min(1).max(50).default(20),
});
export const reviewBody = z.strictObject({
  node: nodeRef.optional(),
  /** A memory neither written nor verified for this many days is stale. */
  stale_days: z.number().int().min(1).max(3_650).default(90),
  limit: z.number().int().min(1).max(200).default(50),
});

/** The normalised text of a trait (its identity for one person), folded as titles are. */
export const normaliseTrait = (value: string): string => normaliseTitle(value);
