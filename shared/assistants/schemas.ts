import { z } from 'zod';
import { pageQuery } from '../pagination.js';
import { withErrorCode } from '../validation.js';

/**
 * Request shapes of OpenAI's Assistants v2 (/v1/assistants, /v1/threads, messages, runs), read
 * from its published OpenAPI description and the openai SDK's types. A field whose failure has
 * its own code in spec 1 carries it; the rules across fields (a tool's shape and JSON schema, the
 * model reference) are checked by the domain.
 */
const metadata = withErrorCode(z.record(z.string(), z.unknown()).nullable(), 'invalid_metadata');
const temperature = withErrorCode(z.number().min(0).max(2), 'invalid_temperature').nullable();
const topP = withErrorCode(z.number().min(0).max(1), 'invalid_top_p').nullable();
const tools = withErrorCode(z.array(z.unknown()).max(128), 'invalid_tools').describe('function tools ({type: "function", function: {name, description, parameters}}) and file_search.');
const responseFormat = z
  .union([
    z.literal('auto'),
    z.strictObject({ type: z.literal('text') }),
    z.strictObject({ type: z.literal('json_object') }),
    z.strictObject({ type: z.literal('json_schema'), json_schema: z.object({ name: z.string(), schema: z.record(z.string(), z.unknown()).optional(), strict: z.boolean().nullable().optional(), description: z.string().optional() }) }),
  ])
  .nullable();

export const toolResources = z
  .object({
    file_search: z.object({ vector_store_ids: z.array(z.string()).max(1).optional() }).optional(),
    code_interpreter: z.object({ file_ids: z.array(z.string()).optional() }).optional(),
  })
  .nullable();

export const assistantBody = z.strictObject({
  model: withErrorCode(z.string().min(1), 'invalid_model').describe('A chat model reference of the gateway: svc:, match:, slot: or dyn:.'),
  name: withErrorCode(z.string().min(1).max(256), 'invalid_name').nullable().optional().describe('Unique among your active assistants.'),
  description: z.string().max(512).nullable().optional(),
  instructions: z.string().max(256_000).nullable().optional(),
  tools: tools.optional(),
  tool_resources: toolResources.optional(),
  temperature: temperature.optional(),
  top_p: topP.optional(),
  response_format: responseFormat.optional(),
  metadata: metadata.optional(),
  reasoning_effort: z.string().nullable().optional().describe('Accepted and ignored.'),
});

export const assistantUpdateBody = assistantBody.partial();

export const listQuery = pageQuery.extend({ order: z.enum(['asc', 'desc']).optional(), before: z.string().optional() });

const textPart = z.object({ type: z.literal('text'), text: z.string() });
// Made fresh for each use: withErrorCode marks a schema instance, and a message's code differs by where it sits.
const messageContent = () => z.union([z.string().min(1), z.array(z.union([textPart, z.object({ type: z.string() }).loose()])).min(1)]);
const messageRole = () => z.enum(['user', 'assistant']);
const attachment = z.object({ file_id: z.string(), tools: z.array(z.object({ type: z.string() })).optional() });

const messageFields = {
  role: messageRole(),
  content: messageContent(),
  attachments: z.array(attachment).max(20).nullable().optional(),
  metadata: metadata.optional(),
};
/** A message of a thread: each field's failure is invalid_messages. */
export const messageBody = z.strictObject({
  role: withErrorCode(messageRole(), 'invalid_messages'),
  content: withErrorCode(messageContent(), 'invalid_messages'),
  attachments: withErrorCode(z.array(attachment).max(20).nullable(), 'invalid_messages').optional(),
  metadata: metadata.optional(),
});
/** A run's additional message: its failures are invalid_additional_messages, from the array's code. */
const additionalMessage = z.strictObject(messageFields);
export type MessageBody = z.output<typeof messageBody>;

export const threadBody = z.strictObject({
  messages: withErrorCode(z.array(messageBody).max(100), 'invalid_messages').optional(),
  tool_resources: toolResources.optional(),
  metadata: metadata.optional(),
});

export const threadUpdateBody = z.strictObject({ tool_resources: toolResources.optional(), metadata: metadata.optional() });

export const messageListQuery = listQuery.extend({ run_id: z.string().optional() });

const truncationStrategy = z
  .strictObject({ type: z.enum(['auto', 'last_messages']), last_messages: z.int32().min(1).nullable().optional() })
  .nullable();

const runFields = {
  assistant_id: withErrorCode(z.string().min(1), 'invalid_assistant_id'),
  model: withErrorCode(z.string().min(1), 'invalid_model').nullable().optional(),
  instructions: z.string().max(256_000).nullable().optional(),
  additional_instructions: z.string().max(256_000).nullable().optional(),
  additional_messages: withErrorCode(z.array(additionalMessage).max(100), 'invalid_additional_messages').nullable().optional(),
  tools: tools.nullable().optional(),
  metadata: metadata.optional(),
  temperature: temperature.optional(),
  top_p: topP.optional(),
  stream: z.boolean().nullable().optional(),
  max_prompt_tokens: z.int32().min(256).nullable().optional(),
  max_completion_tokens: z.int32().min(16).nullable().optional(),
  truncation_strategy: truncationStrategy.optional(),
  tool_choice: z.union([z.enum(['none', 'auto', 'required']), z.object({ type: z.string(), function: z.object({ name: z.string() }).optional() })]).nullable().optional(),
  parallel_tool_calls: z.boolean().optional(),
  response_format: responseFormat.optional(),
  reasoning_effort: z.string().nullable().optional(),
};

export const runBody = z.strictObject(runFields);
export type RunBody = z.output<typeof runBody>;

/** POST /v1/threads/runs: a thread and its first run at once (the thread's messages instead of additional_messages). */
const { additional_messages: _notHere, ...threadRunFields } = runFields;
export const threadAndRunBody = z.strictObject({
  ...threadRunFields,
  thread: threadBody.optional(),
  tool_resources: toolResources.optional(),
});

export const runUpdateBody = z.strictObject({ metadata: metadata.optional() });

export const toolOutputsBody = z.strictObject({
  tool_outputs: withErrorCode(z.array(z.strictObject({ tool_call_id: z.string().min(1), output: z.string().max(512_000) })).min(1), 'invalid_tool_call_id'),
  stream: z.boolean().nullable().optional(),
});
