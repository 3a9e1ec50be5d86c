import type { Request } from 'express';
import type { GatewayServices } from '../../shared/composition/gateway.js';
import { createAssistant, deleteAssistant, getAssistant, listAssistants, updateAssistant } from '../../shared/assistants/assistants.js';
import { cancelRun, createRun, createThreadAndRun, getRun, getStep, listRuns, listSteps, submitToolOutputs, updateRun } from '../../shared/assistants/runs.js';
import {
  assistantBody,
  assistantUpdateBody,
  listQuery,
  messageBody,
  messageListQuery,
  runBody,
  runUpdateBody,
  threadAndRunBody,
  threadBody,
  threadUpdateBody,
  toolOutputsBody,
} from '../../shared/assistants/schemas.js';
import { createMessage, createThread, deleteThread, getMessage, getThread, listMessages, updateMessage, updateThread, type ThreadCaller } from '../../shared/assistants/threads.js';
import type { RunEvent } from '../../shared/assistants/run-events.js';
import { principalOf } from '../middleware/authenticate.js';
import { abortWhenClientLeaves, meteredCallOf } from '../middleware/metered-call.js';
import { paced, POLLED_RESPONSE } from '../poll-pace.js';
import { developerKey, metered, route, type RouteDefinition } from '../route-table.js';

/**
 * Assistants, threads, messages and runs (OpenAI's Assistants v2, so the openai SDK's
 * beta.assistants and beta.threads work unchanged). Assistants are managed with a developer key;
 * threads and runs are also reachable by client tokens with the assistants_threads scope, for
 * their own customer's threads only (spec 1, "Client-token reach").
 */
export function assistantRoutes(platform: GatewayServices): RouteDefinition[] {
  const surface = 'assistants';
  const developer = (req: Request) => principalOf(req).accountId;
  /** The caller of a thread route: a client token reaches only its customer's threads; Svc-Customer under a key bills runs to that customer. */
  const caller = (req: Request): ThreadCaller => {
    const call = meteredCallOf(req);
    const pinned = req.credential?.scheme === 'client' ? (call.customer?.id ?? null) : null;
    return { developerId: call.developerId, payerAccountId: call.payerAccountId, customerId: pinned, billedCustomerId: call.customer?.id ?? null };
  };
  const threads = metered('api:chat', 'assistants_threads');
  const threadReads = metered('api:read', 'assistants_threads');
  const threadAdmin = metered('api:write', null);
  /**
   * stream: true — OpenAI's assistant stream events as server-sent events: the run's creation, then
   * what its workflow's activities publish as they go, until it finishes or waits for tool outputs.
   */
  const streamRun = async (req: Request, res: import('express').Response, runId: string, afterEventId: string, first: RunEvent[]) => {
    res.status(200).setHeader('content-type', 'text/event-stream');
    res.setHeader('cache-control', 'no-cache');
    const send = ({ event, data }: RunEvent) => res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
    first.forEach(send);
    for await (const event of platform.runEvents.follow(runId, afterEventId, abortWhenClientLeaves(res))) send(event);
    if (!res.writableEnded) res.end('event: done\ndata: [DONE]\n\n');
  };
  return [
    route({
      method: 'post', path: '/v1/assistants', surface, summary: 'Create an assistant', access: developerKey('api:write'), input: { body: assistantBody },
      handle: async (req, res, { body }) => res.json(await createAssistant(platform, developer(req), body)),
    }),
    route({
      method: 'get', path: '/v1/assistants', surface, summary: 'List assistants', access: developerKey('api:read'), input: { query: listQuery },
      handle: async (req, res, { query }) => res.json(await listAssistants(platform.db, developer(req), query)),
    }),
    route({
      method: 'get', path: '/v1/assistants/:id', surface, summary: 'Retrieve an assistant', access: developerKey('api:read'),
      handle: async (req, res, { params }) => res.json(await getAssistant(platform.db, developer(req), params.id)),
    }),
    route({
      method: 'post', path: '/v1/assistants/:id', surface, summary: 'Modify an assistant', access: developerKey('api:write'), input: { body: assistantUpdateBody },
      handle: async (req, res, { params, body }) => res.json(await updateAssistant(platform, developer(req), params.id, body)),
    }),
    route({
      method: 'delete', path: '/v1/assistants/:id', surface, summary: 'Delete an assistant', access: developerKey('api:write'),
      handle: async (req, res, { params }) => res.json(await deleteAssistant(platform.db, developer(req), params.id)),
    }),

    route({
      method: 'post', path: '/v1/threads', surface, summary: 'Create a thread', access: threads, input: { body: threadBody, bodyOptional: true },
      handle: async (req, res, { body }) => res.json(await createThread(platform, caller(req), body)),
    }),
    route({
      method: 'post', path: '/v1/threads/runs', surface, summary: 'Create a thread and run it', access: threads, input: { body: threadAndRunBody }, response: POLLED_RESPONSE,
      handle: async (req, res, { body }) => {
        const created = await createThreadAndRun(platform, caller(req), body);
        if (!body.stream) return res.json(paced(res, 'run', created));
        await streamRun(req, res, created.id, '0', [{ event: 'thread.run.created', data: created }, { event: 'thread.run.queued', data: created }]);
      },
    }),
    route({
      method: 'get', path: '/v1/threads/:threadId', surface, summary: 'Retrieve a thread', access: threadReads,
      handle: async (req, res, { params }) => res.json(await getThread(platform.db, caller(req), params.threadId)),
    }),
    route({
      method: 'post', path: '/v1/threads/:threadId', surface, summary: 'Modify a thread', access: threadAdmin, input: { body: threadUpdateBody },
      handle: async (req, res, { params, body }) => res.json(await updateThread(platform.db, caller(req), params.threadId, body)),
    }),
    route({
      method: 'delete', path: '/v1/threads/:threadId', surface, summary: 'Delete a thread', access: threadAdmin,
      handle: async (req, res, { params }) => res.json(await deleteThread(platform.db, caller(req), params.threadId)),
    }),

    route({
      method: 'post', path: '/v1/threads/:threadId/messages', surface, summary: 'Add a message to a thread', access: threads, input: { body: messageBody },
      handle: async (req, res, { params, body }) => res.json(await createMessage(platform, caller(req), params.threadId, body)),
    }),
    route({
      method: 'get', path: '/v1/threads/:threadId/messages', surface, summary: "List a thread's messages", access: threadReads, input: { query: messageListQuery },
      handle: async (req, res, { params, query }) => res.json(await listMessages(platform.db, caller(req), params.threadId, query)),
    }),
    route({
      method: 'get', path: '/v1/threads/:threadId/messages/:messageId', surface, summary: 'Retrieve a message', access: threadReads,
      handle: async (req, res, { params }) => res.json(await getMessage(platform.db, caller(req), params.threadId, params.messageId)),
    }),
    route({
      method: 'post', path: '/v1/threads/:threadId/messages/:messageId', surface, summary: "Modify a message's metadata", access: threadAdmin, input: { body: runUpdateBody },
      handle: async (req, res, { params, body }) => res.json(await updateMessage(platform.db, caller(req), params.threadId, params.messageId, body.metadata)),
    }),

    route({
      method: 'post', path: '/v1/threads/:threadId/runs', surface, summary: 'Create a run (a Temporal workflow whose id is the run id)', access: threads, input: { body: runBody }, response: POLLED_RESPONSE,
      handle: async (req, res, { params, body }) => {
        const created = await createRun(platform, caller(req), params.threadId, body);
        if (!body.stream) return res.json(paced(res, 'run', created));
        await streamRun(req, res, created.id, '0', [{ event: 'thread.run.created', data: created }, { event: 'thread.run.queued', data: created }]);
      },
    }),
    route({
      method: 'get', path: '/v1/threads/:threadId/runs', surface, summary: "List a thread's runs", access: threadReads, input: { query: listQuery },
      handle: async (req, res, { params, query }) => res.json(await listRuns(platform.db, caller(req), params.threadId, query)),
    }),
    route({
      method: 'get', path: '/v1/threads/:threadId/runs/:runId', surface, summary: 'Retrieve a run', access: threadReads, response: POLLED_RESPONSE,
      handle: async (req, res, { params }) => res.json(paced(res, 'run', await getRun(platform.db, caller(req), params.threadId, params.runId))),
    }),
    route({
      method: 'post', path: '/v1/threads/:threadId/runs/:runId', surface, summary: "Modify a run's metadata", access: threadAdmin, input: { body: runUpdateBody },
      handle: async (req, res, { params, body }) => res.json(await updateRun(platform.db, caller(req), params.threadId, params.runId, body.metadata)),
    }),
    route({
      method: 'post', path: '/v1/threads/:threadId/runs/:runId/submit_tool_outputs', surface, summary: 'Submit the outputs of the function calls a run waits for', access: threads,
      input: { body: toolOutputsBody }, response: POLLED_RESPONSE,
      handle: async (req, res, { params, body }) => {
        const submitted = await submitToolOutputs(platform, caller(req), params.threadId, params.runId, body);
        if (!body.stream) return res.json(paced(res, 'run', submitted.run));
        await streamRun(req, res, submitted.run.id, submitted.afterEventId, [{ event: 'thread.run.in_progress', data: submitted.run }]);
      },
    }),
    route({
      method: 'post', path: '/v1/threads/:threadId/runs/:runId/cancel', surface, summary: 'Cancel a run', access: threads,
      handle: async (req, res, { params }) => res.json(await cancelRun(platform, caller(req), params.threadId, params.runId)),
    }),
    route({
      method: 'get', path: '/v1/threads/:threadId/runs/:runId/steps', surface, summary: "List a run's steps", access: threadReads, input: { query: listQuery },
      handle: async (req, res, { params, query }) => res.json(await listSteps(platform.db, caller(req), params.threadId, params.runId, query.order)),
    }),
    route({
      method: 'get', path: '/v1/threads/:threadId/runs/:runId/steps/:stepId', surface, summary: 'Retrieve a run step', access: threadReads,
      handle: async (req, res, { params }) => res.json(await getStep(platform.db, caller(req), params.threadId, params.runId, params.stepId)),
    }),
  ];
}
