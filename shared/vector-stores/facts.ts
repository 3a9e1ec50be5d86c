import type { MeteredCall } from '../billing/metered-call.js';
import type { GatewayServices } from '../composition/gateway.js';
import { parseChatInput, planChat } from '../inference/chat.js';
import { completeChat } from '../inference/complete-chat.js';
import { resolutionContextFor } from '../models/definitions.js';

/**
 * GraphRAG facts: subject-predicate-object triples extracted from each chunk of a graphrag store
 * through the gateway's own chat path (metered like any completion, with a json_schema answer),
 * stored beside the chunks and returned with search results as facts[].
 */
export interface Fact {
  subject: string;
  predicate: string;
  object: string;
}

const MAX_FACTS_PER_CHUNK = 12;
const MAX_PART_LENGTH = 200;

const FACTS_SCHEMA = {
  type: 'object',
  properties: {
    facts: {
      type: 'array',
      items: {
        type: 'object',
        properties: { subject: { type: 'string' }, predicate: { type: 'string' }, object: { type: 'string' } },
        required: ['subject', 'predicate', 'object'],
        additionalProperties: false,
      },
    },
  },
  required: ['facts'],
  additionalProperties: false,
};

const INSTRUCTIONS =
  'Extract the factual statements of the text as subject-predicate-object triples. Use short noun phrases for subject and object and a short verb phrase for predicate. Only facts the text states.';

/** The facts of one chunk; `billingKey` makes its charge once-only when a stage runs again. */
export async function extractFacts(platform: GatewayServices, call: MeteredCall, model: string, text: string, billingKey: string): Promise<Fact[]> {
  const input = parseChatInput(
    {
      model,
      messages: [
        { role: 'system', content: INSTRUCTIONS },
        { role: 'user', content: text },
      ],
      temperature: 0,
      response_format: { type: 'json_schema', json_schema: { name: 'subject_predicate_object_facts', strict: true, schema: FACTS_SCHEMA } },
    },
    { idempotencyKey: undefined },
  );
  const targets = await planChat(input, resolutionContextFor(platform, call.developerId), platform.providers);
  const completed = await completeChat(platform, call, input, targets, { signal: new AbortController().signal, billingKey });
  const content = completed.body.choices[0]?.message.content ?? '';
  return factsOf(content);
}

/** The facts of a json_schema answer; anything malformed is dropped, never thrown. */
export function factsOf(content: string): Fact[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(content);
  } catch {
    return [];
  }
  const facts = (parsed as { facts?: unknown }).facts;
  if (!Array.isArray(facts)) return [];
  return facts
    .filter((fact): fact is Fact => ['subject', 'predicate', 'object'].every((part) => typeof (fact as Record<string, unknown>)?.[part] === 'string' && (fact as Record<string, string>)[part]!.trim() !== ''))
    .slice(0, MAX_FACTS_PER_CHUNK)
    .map((fact) => ({ subject: fact.subject.trim().slice(0, MAX_PART_LENGTH), predicate: fact.predicate.trim().slice(0, MAX_PART_LENGTH), object: fact.object.trim().slice(0, MAX_PART_LENGTH) }));
}
