import { createHash } from 'node:crypto';

/**
 * When the emulated model calls tools, whatever the wire style. Each style reads its own
 * tool-choice fields into a ToolChoice (OpenAI `tool_choice` and `parallel_tool_calls`, Anthropic
 * `tool_choice`, Gemini `toolConfig.functionCallingConfig`, Cohere `tool_choice`, Bedrock
 * `toolConfig.toolChoice`) and asks plannedToolCalls which calls to answer with:
 * - `none` never calls a tool, even with the marker;
 * - `auto` calls a tool only when the prompt carries the marker;
 * - `required` always calls one: the first allowed tool, or the one a marker names.
 * A named function (OpenAI's `{type:'function'}`, Anthropic's `{type:'tool'}`, Gemini's
 * allowedFunctionNames) is `required` with only that tool allowed. Once a tool result is the last
 * message the model answers in text whatever the choice, so an agent loop ends.
 *
 * The marker: `EMULATOR_CALL_TOOL` asks for the first tool, `EMULATOR_CALL_TOOL:<name>` for that
 * one; several named markers ask for several calls (one per distinct tool), which an answer carries
 * only while parallel tool calls are allowed.
 */

export const CALL_TOOL_MARKER = 'EMULATOR_CALL_TOOL';
const MARKER = /EMULATOR_CALL_TOOL(?::([A-Za-z0-9_.-]+))?/g;

export interface ToolChoice {
  mode: 'auto' | 'required' | 'none';
  /** Only these tools may be called; absent = any of the request's tools. */
  allowed?: readonly string[];
  /** False: at most one call in an answer. */
  parallel: boolean;
}

export const AUTO_CHOICE: ToolChoice = { mode: 'auto', parallel: true };

export interface OfferedTool {
  name: string;
  /** The tool's parameters as a JSON schema (OpenAPI-style upper-case types too, as Gemini sends them). */
  schema: unknown;
}

export interface PlannedCall {
  name: string;
  arguments: Record<string, unknown>;
}

/**
 * The calls to answer with, in order; empty means answer in text. `seed` makes the arguments
 * deterministic (the same prompt to the same model gets the same arguments).
 */
export function plannedToolCalls(request: { prompt: string; tools: readonly OfferedTool[]; choice: ToolChoice; toolResultIsLast: boolean; seed: string }): PlannedCall[] {
  const { prompt, tools, choice } = request;
  if (choice.mode === 'none' || request.toolResultIsLast) return [];
  const callable = choice.allowed ? tools.filter((tool) => choice.allowed!.includes(tool.name)) : tools;
  if (callable.length === 0) return [];
  // A marker naming a tool that may not be called still asks for a call: the model calls one it may.
  const asked = [...prompt.matchAll(MARKER)].map((match) => callable.find((tool) => tool.name === match[1]) ?? callable[0]!);
  const chosen = [...new Set(asked)];
  if (chosen.length === 0 && choice.mode === 'required') chosen.push(callable[0]!);
  return chosen.slice(0, choice.parallel ? undefined : 1).map((tool) => ({ name: tool.name, arguments: argumentsFor(tool.schema, `${request.seed}\n${tool.name}`) }));
}

/** Arguments that validate against the tool's parameters schema (an object, whatever the schema says at the top). */
export function argumentsFor(schema: unknown, seed: string): Record<string, unknown> {
  const value = valueForSchema(schema ?? { type: 'object' }, seed);
  return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
}

type SchemaNode = {
  type?: unknown;
  properties?: Record<string, unknown>;
  items?: unknown;
  enum?: unknown[];
  const?: unknown;
  anyOf?: unknown[];
  oneOf?: unknown[];
  allOf?: unknown[];
  format?: string;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number | boolean;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
};

const hashNumber = (seed: string, hexDigits: number) => parseInt(createHash('sha256').update(seed).digest('hex').slice(0, hexDigits), 16);

const STRING_FORMATS: Record<string, string> = {
  date: '2025-01-15',
  'date-time': '2025-01-15T12:00:00Z',
  time: '12:00:00',
  email: 'user@example.com',
  uri: 'https://example.com/',
  url: 'https://example.com/',
  uuid: '123e4567-e89b-42d3-a456-426614174000',
};

/**
 * A deterministic value for a JSON schema: const and the first enum value as given, the first
 * alternative of anyOf/oneOf, every declared property of an object (so `required` and strict mode
 * hold), at least one item (or minItems) of an array, numbers within their bounds, strings of
 * their format and length.
 */
export function valueForSchema(schema: unknown, seed: string): unknown {
  const node = (schema ?? {}) as SchemaNode;
  if (node.const !== undefined) return node.const;
  if (Array.isArray(node.enum) && node.enum.length > 0) return node.enum[0];
  const variants = node.anyOf ?? node.oneOf;
  if (Array.isArray(variants) && variants.length > 0) return valueForSchema(variants[0], seed);
  if (Array.isArray(node.allOf) && node.allOf.length > 0) {
    const parts = node.allOf.map((part) => valueForSchema(part, seed));
    return parts.every((part) => part !== null && typeof part === 'object' && !Array.isArray(part)) ? Object.assign({}, ...parts) : parts[0];
  }
  const declared = Array.isArray(node.type) ? node.type.find((type) => type !== 'null' && type !== 'NULL') : node.type;
  const type = typeof declared === 'string' ? declared.toLowerCase() : node.properties ? 'object' : 'string';
  switch (type) {
    case 'object':
      return Object.fromEntries(Object.entries(node.properties ?? {}).map(([key, child]) => [key, valueForSchema(child, `${seed}.${key}`)]));
    case 'array':
      return Array.from({ length: Math.max(1, node.minItems ?? 1) }, (_, i) => valueForSchema(node.items, `${seed}[${i}]`));
    case 'integer':
    case 'number': {
      const low = node.minimum ?? (typeof node.exclusiveMinimum === 'number' ? node.exclusiveMinimum + 1 : 0);
      const high = node.maximum ?? low + 99;
      return high < low ? low : low + (hashNumber(seed, 4) % (Math.floor(high - low) + 1));
    }
    case 'boolean':
      return hashNumber(seed, 2) % 2 === 0;
    case 'null':
      return null;
    default: {
      const text = (node.format && STRING_FORMATS[node.format]) ?? `emulated ${hashNumber(seed, 8).toString(16).padStart(8, '0')}`;
      const padded = text.padEnd(node.minLength ?? 0, 'x');
      return node.maxLength !== undefined ? padded.slice(0, Math.max(node.maxLength, node.minLength ?? 0)) : padded;
    }
  }
}
