import type { z } from 'zod';
import type { GatewayServices } from '../composition/gateway.js';
import type { Db } from '../db/pool.js';
import { serviceError, ServiceError } from '../errors.js';
import { acceptIdCursor } from '../files/files.js';
import { newId } from '../ids.js';
import { compileSchema } from '../inference/json-schema.js';
import { parseMetadata } from '../metadata.js';
import { resolutionContextFor } from '../models/definitions.js';
import { parseModelField, resolveModelRef } from '../models/refs.js';
import { pageRequest, toPage, withIds } from '../pagination.js';
import * as repo from './repository.js';
import type { assistantBody, assistantUpdateBody } from './schemas.js';

/**
 * Assistants (OpenAI's /v1/assistants): a model reference of the gateway, instructions, tools
 * (function tools with a JSON-schema parameters object, file_search) and the vector stores
 * file_search reads. A name is unique among the developer's active assistants.
 */
export type AssistantBody = z.output<typeof assistantBody>;
const UNIQUE_VIOLATION = '23505';
const TOOL_NAME = /^[A-Za-z0-9_-]{1,64}$/;
export const LIST_PAGE = { defaultLimit: 20, maxLimit: 100 };

export type AssistantTool = { type: 'file_search'; file_search?: { max_num_results?: number } } | { type: 'function'; function: { name: string; description?: string; parameters?: Record<string, unknown>; strict?: boolean } };

/** Each tool's shape (invalid_tool_shape) and a function's parameters (invalid_tool_schema). */
export function checkTools(tools: unknown[], param = 'tools'): AssistantTool[] {
  return tools.map((tool, i) => {
    const at = `${param}.${i}`;
    if (!tool || typeof tool !== 'object' || Array.isArray(tool)) throw serviceError('invalid_tool_shape', { param: at });
    const { type } = tool as { type?: unknown };
    if (type === 'file_search') {
      const options = (tool as { file_search?: { max_num_results?: unknown } }).file_search;
      const max = options?.max_num_results;
      if (max !== undefined && (typeof max !== 'number' || !Number.isInteger(max) || max < 1 || max > 50)) throw serviceError('invalid_tool_shape', { param: `${at}.file_search.max_num_results` });
      return { type: 'file_search', ...(options && { file_search: { ...(max !== undefined && { max_num_results: max as number }) } }) };
    }
    if (type !== 'function') throw serviceError('invalid_tool_shape', { param: `${at}.type`, message: 'A tool is of type function or file_search.' });
    const fn = (tool as { function?: Record<string, unknown> }).function;
    if (!fn || typeof fn !== 'object' || typeof fn.name !== 'string' || !TOOL_NAME.test(fn.name)) throw serviceError('invalid_tool_shape', { param: `${at}.function.name` });
    if (fn.description !== undefined && typeof fn.description !== 'string') throw serviceError('invalid_tool_shape', { param: `${at}.function.description` });
    const parameters = fn.parameters;
    if (parameters !== undefined) {
      if (!parameters || typeof parameters !== 'object' || Array.isArray(parameters) || ((parameters as { type?: unknown }).type !== undefined && (parameters as { type?: unknown }).type !== 'object')) {
        throw serviceError('invalid_tool_schema', { param: `${at}.function.parameters`, message: 'parameters must be a JSON Schema of type object.' });
      }
      try {
        compileSchema(parameters as Record<string, unknown>);
      } catch (error) {
        throw serviceError('invalid_tool_schema', { param: `${at}.function.parameters`, message: error instanceof Error ? error.message : 'The schema does not compile.' });
      }
    }
    return {
      type: 'function',
      function: { name: fn.name, ...(typeof fn.description === 'string' && { description: fn.description }), ...(parameters !== undefined && { parameters: parameters as Record<string, unknown> }), ...(typeof fn.strict === 'boolean' && { strict: fn.strict }) },
    };
  });
}

/** The model must resolve, as a chat call would resolve it, to a chat model (invalid_model otherwise, with the reason). */
export async function checkChatModel(platform: Pick<GatewayServices, 'db'>, developerId: string, model: string, param = 'model'): Promise<void> {
  try {
    const { refs } = parseModelField(model);
    const resolution = await resolveModelRef(refs[0]!, resolutionContextFor(platform, developerId));
    if (resolution.model.kind !== 'chat') throw serviceError('invalid_model', { param, message: `${model} is not a chat model.` });
  } catch (error) {
    if (error instanceof ServiceError && error.code !== 'invalid_model') throw serviceError('invalid_model', { param, message: error.message });
    throw error;
  }
}

async function valuesOf(platform: Pick<GatewayServices, 'db'>, developerId: string, body: AssistantBody): Promise<Omit<repo.AssistantRow, 'id' | 'developer_id' | 'created_at'>> {
  await checkChatModel(platform, developerId, body.model);
  return {
    name: body.name ?? null,
    description: body.description ?? null,
    model: body.model,
    instructions: body.instructions ?? null,
    tools: checkTools(body.tools ?? []),
    tool_resources: body.tool_resources ?? null,
    temperature: body.temperature ?? null,
    top_p: body.top_p ?? null,
    response_format: body.response_format ?? null,
    metadata: body.metadata == null ? null : parseMetadata(body.metadata),
  };
}

export async function createAssistant(platform: Pick<GatewayServices, 'db'>, developerId: string, body: AssistantBody) {
  const values = await valuesOf(platform, developerId, body);
  try {
    return formatAssistant(await repo.insertAssistant(platform.db, { id: newId('asst_'), developer_id: developerId, ...values }));
  } catch (error) {
    if ((error as { code?: string }).code === UNIQUE_VIOLATION) throw serviceError('assistant_name_in_use', { param: 'name' });
    throw error;
  }
}

export async function getAssistant(db: Db, developerId: string, id: string) {
  return formatAssistant(await assistantOf(db, developerId, id));
}

export async function assistantOf(db: Db, developerId: string, id: string): Promise<repo.AssistantRow> {
  const assistant = await repo.findAssistant(db, developerId, id);
  if (!assistant) throw serviceError('not_found', { message: 'No such assistant.' });
  return assistant;
}

/** POST /v1/assistants/{id}: the fields given replace the assistant's. */
export async function updateAssistant(platform: Pick<GatewayServices, 'db'>, developerId: string, id: string, body: z.output<typeof assistantUpdateBody>) {
  const current = await assistantOf(platform.db, developerId, id);
  const merged: AssistantBody = {
    model: body.model ?? current.model,
    name: body.name !== undefined ? body.name : current.name,
    description: body.description !== undefined ? body.description : current.description,
    instructions: body.instructions !== undefined ? body.instructions : current.instructions,
    tools: body.tools ?? current.tools,
    tool_resources: body.tool_resources !== undefined ? body.tool_resources : current.tool_resources,
    temperature: body.temperature !== undefined ? body.temperature : current.temperature,
    top_p: body.top_p !== undefined ? body.top_p : current.top_p,
    response_format: (body.response_format !== undefined ? body.response_format : current.response_format) as AssistantBody['response_format'],
    metadata: body.metadata !== undefined ? body.metadata : current.metadata,
  };
  const values = await valuesOf(platform, developerId, merged);
  try {
    return formatAssistant((await repo.updateAssistant(platform.db, developerId, id, values))!);
  } catch (error) {
    if ((error as { code?: string }).code === UNIQUE_VIOLATION) throw serviceError('assistant_name_in_use', { param: 'name' });
    throw error;
  }
}

export async function deleteAssistant(db: Db, developerId: string, id: string) {
  if (!(await repo.deleteAssistant(db, developerId, id))) throw serviceError('not_found', { message: 'No such assistant.' });
  return { id, object: 'assistant.deleted' as const, deleted: true };
}

export async function listAssistants(db: Db, developerId: string, query: { limit?: string; after?: string; order?: 'asc' | 'desc' }) {
  const page = pageRequest({ limit: query.limit, after: acceptIdCursor(query.after, 'asst_') }, LIST_PAGE);
  return withIds(toPage(await repo.listAssistants(db, developerId, { ...page, order: query.order ?? 'desc' }), page, formatAssistant));
}

export function formatAssistant(assistant: repo.AssistantRow) {
  return {
    id: assistant.id,
    object: 'assistant' as const,
    created_at: seconds(assistant.created_at),
    name: assistant.name,
    description: assistant.description,
    model: assistant.model,
    instructions: assistant.instructions,
    tools: assistant.tools,
    tool_resources: assistant.tool_resources ?? {},
    temperature: assistant.temperature,
    top_p: assistant.top_p,
    response_format: assistant.response_format ?? 'auto',
    metadata: assistant.metadata ?? {},
  };
}

export const seconds = (date: Date) => Math.floor(date.getTime() / 1000);
export const secondsOrNull = (date: Date | null) => (date ? seconds(date) : null);
