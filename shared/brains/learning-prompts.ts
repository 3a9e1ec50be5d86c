import { z } from 'zod';
import { TIERS, type MemoryPolicy } from './policy.js';

/**
 * The three model calls of learning, as chat requests with a json_schema response format:
 * extraction (a transcript to candidate memories), judgement (does a new statement refine or
 * contradict a stored memory) and consolidation (several memories merged into fewer). The text
 * the model reads sits between tags in the last user message, so a model (or the emulator, which
 * answers these three schema names from that text) finds it the same way each time.
 */

export interface TranscriptLine {
  role: 'user' | 'assistant';
  text: string;
}

const entityShape = z.object({ name: z.string().min(1).max(256), aliases: z.array(z.string().min(1).max(256)).max(16).default([]) });
const relationShape = z.object({ from: z.string().min(1).max(256), relation: z.string().min(1).max(64), to: z.string().min(1).max(256) });

export const candidateMemory = z.object({
  type: z.string().min(1).max(64),
  tier: z.enum(TIERS),
  title: z.string().min(1).max(1_024),
  body: z.string().min(1).max(100_000),
  negated: z.boolean().default(false),
  entities: z.array(entityShape).max(32).default([]),
  relations: z.array(relationShape).max(32).default([]),
});
export type CandidateMemory = z.infer<typeof candidateMemory>;

export const extractionAnswer = z.object({
  ignored: z.boolean().default(false),
  memories: z.array(candidateMemory).max(64),
  used_entry_ids: z.array(z.string()).max(100).default([]),
});
export type ExtractionAnswer = z.infer<typeof extractionAnswer>;

export const judgementAnswer = z.object({ relation: z.enum(['same', 'refines', 'contradicts', 'unrelated']), reason: z.string().max(2_000).default('') });
export type Judgement = z.infer<typeof judgementAnswer>;

export const consolidationAnswer = z.object({ memories: z.array(candidateMemory.extend({ replaces: z.array(z.string()).min(1) })).max(64) });

/** A response_format for one of the answers; the schema goes without its $schema line, as providers take it. */
function jsonSchemaOf(name: string, schema: z.ZodType) {
  const { $schema: _dialect, ...body } = z.toJSONSchema(schema, { io: 'input' });
  return { type: 'json_schema', json_schema: { name, schema: body } };
}

// Each answer's format is worked out once: z.toJSONSchema took about 0.47 ms of CPU a call, and every learn pass asks for an extraction.
const EXTRACTION_FORMAT = jsonSchemaOf('brain_memory_extraction', extractionAnswer);
const JUDGEMENT_FORMAT = jsonSchemaOf('brain_memory_judgement', judgementAnswer);
const CONSOLIDATION_FORMAT = jsonSchemaOf('brain_memory_consolidation', consolidationAnswer);

export interface RecalledMemory {
  entryId: string;
  content: string;
}

export function extractionRequest(model: string, policy: MemoryPolicy, transcript: TranscriptLine[], recalled: RecalledMemory[]) {
  const types = policy.type_taxonomy.map((entry) => `${entry.type} (tier ${entry.tier})`).join(', ');
  const ignore = policy.ignore.rubric ? `\nDo not remember: ${policy.ignore.rubric}` : '';
  const system = [
    'You extract durable memories from a conversation for a long-term memory store.',
    `What to remember: ${policy.extraction_rubric}${ignore}`,
    `Each memory has one of these types: ${types}. Give it a short title naming what it is about (a later statement about the same thing gets the same title), a one-sentence body in the third person, negated true when it denies something, the named entities it mentions (with aliases) and the relations it states between them.`,
    'Also list the ids of the recalled memories that the assistant used in its answers. If nothing is worth remembering, answer ignored true with no memories.',
  ].join('\n');
  const user = `<transcript>\n${transcript.map((line) => `${line.role}: ${line.text}`).join('\n')}\n</transcript>\n<recalled>\n${recalled.map((memory) => `[${memory.entryId}] ${oneLine(memory.content)}`).join('\n')}\n</recalled>`;
  return chatBody(model, system, user, EXTRACTION_FORMAT);
}

export function judgementRequest(model: string, stored: string, incoming: string) {
  const system = 'Compare a stored memory with an incoming statement about the same subject. Answer same (it says the same thing), refines (it updates or adds to it), contradicts (it denies it) or unrelated, with a short reason.';
  return chatBody(model, system, `<stored>${oneLine(stored)}</stored>\n<incoming>${oneLine(incoming)}</incoming>`, JUDGEMENT_FORMAT);
}

export interface ConsolidationInput {
  entryId: string;
  type: string | null;
  title: string | null;
  body: string;
}

export function consolidationRequest(model: string, memories: ConsolidationInput[]) {
  const system = 'Merge these related memories into as few as possible without losing a fact. For each merged memory list the ids it replaces.';
  const user = `<memories>\n${memories.map((memory) => `[${memory.entryId}] (${memory.type ?? 'memory'}) ${memory.title ?? ''}: ${oneLine(memory.body)}`).join('\n')}\n</memories>`;
  return chatBody(model, system, user, CONSOLIDATION_FORMAT);
}

function chatBody(model: string, system: string, user: string, responseFormat: unknown): Record<string, unknown> {
  return { model, temperature: 0, messages: [{ role: 'system', content: system }, { role: 'user', content: user }], response_format: responseFormat };
}

const oneLine = (text: string) => text.replace(/\s+/g, ' ').trim();

/** The JSON a model answered, checked against its schema; a malformed answer is null (the caller decides what that costs). */
export function parseAnswer<T extends z.ZodType>(schema: T, content: unknown): z.output<T> | null {
  if (typeof content !== 'string') return null;
  try {
    const parsed = schema.safeParse(JSON.parse(content));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}

/** Titles match after case and whitespace are set aside. */
export const normalizeTitle = (title: string | null) => (title ?? '').toLowerCase().replace(/\s+/g, ' ').trim();

/**
 * A transcript's lines: each non-blank line starts with `user:` or `assistant:` (any case);
 * anything else is a mistake the caller should hear about, with the line that made it.
 */
export function parseTranscript(text: string): { lines: TranscriptLine[] } | { error: string } {
  const lines: TranscriptLine[] = [];
  const raw = text.split(/\r?\n/);
  for (let i = 0; i < raw.length; i++) {
    const line = raw[i]!.trim();
    if (line === '') continue;
    const match = /^(user|assistant)\s*:\s?(.*)$/i.exec(line);
    if (!match) return { error: `line ${i + 1} must start with "user:" or "assistant:"` };
    lines.push({ role: match[1]!.toLowerCase() as TranscriptLine['role'], text: match[2]!.trim() });
  }
  if (!lines.some((line) => line.role === 'user' && line.text !== '')) return { error: 'the transcript needs at least one "user:" line with text' };
  return { lines };
}
