/**
 * Assistant runs and conversation turns (issue 25), in this process against a Temporal dev server
 * of the bench's own, with the upstream emulator in its own process answering every chat call
 * after 20 ms. Runs: many created at once (no tools, one model call each) and each followed on its
 * event stream until thread.run.completed; runs per second over the whole set, and each run's
 * time from create to completed less the 20 ms upstream. Conversation turns: one after another,
 * each timed against a plain chat completion of the same history through the same metering.
 * Figures are printed, never asserted.
 */
import { fileURLToPath } from 'node:url';
import { Context } from '@temporalio/activity';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker, bundleWorkflowCode } from '@temporalio/worker';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createDeveloperAccount } from '../shared/accounts/accounts.js';
import { createAssistant } from '../shared/assistants/assistants.js';
import { createRun } from '../shared/assistants/runs.js';
import { createThread } from '../shared/assistants/threads.js';
import type { MeteredCall } from '../shared/billing/metered-call.js';
import { createGatewayServices } from '../shared/composition/gateway.js';
import { loadConfig } from '../shared/config.js';
import { createConversation, sendMessage } from '../shared/conversations/conversations.js';
import { createCustomer } from '../shared/customers/customers.js';
import { parseChatInput, planChat } from '../shared/inference/chat.js';
import { completeChat } from '../shared/inference/complete-chat.js';
import { resolutionContextFor } from '../shared/models/definitions.js';
import { freePort, startTemporalDevServer, stopChild } from '../scripts/lib/local-services.js';
import { bundleWorkflows, createTemporalWorker } from '../workers/temporal-worker.js';
import { quantile as p } from './support/corpus.js';
import { startEmulatorProcess } from './support/emulator-process.js';
import { goal, table } from './support/report.js';
import { timedAtATime } from './support/timing.js';

export interface AssistantBenchOptions {
  databaseUrl: string;
  runs: number;
  concurrency: number;
  /** Runs timed one at a time, for a run's own added latency. */
  aloneRuns: number;
  turns: number;
  latencyMs: number;
}

const MODEL = 'svc:openai/gpt-4o-mini';
const TURN_WARMUP = 20;

export async function runAssistantBench(options: AssistantBenchOptions): Promise<void> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-assistants-'));
  const temporal = await startTemporalDevServer({ port: await freePort(), logFile: path.join(dataDir, 'temporal.log') });
  const { child: emulator, providerEnv } = await startEmulatorProcess(options.latencyMs);
  const config = loadConfig({
    ...process.env,
    DATABASE_URL: options.databaseUrl,
    TEMPORAL_ADDRESS: temporal.address,
    TEMPORAL_TASK_QUEUE: `svc-bench-assistants-${process.pid}`,
    REDIS_KEY_PREFIX: `svc-bench-assistants-${process.pid}`,
    LOG_LEVEL: 'warn',
    DATA_DIR: dataDir,
    DEVELOPER_RPM_LIMIT: '100000000',
    DEVELOPER_TPM_LIMIT: '1000000000',
    DATABASE_POOL_MAX: '40',
    ...providerEnv,
  });
  const platform = createGatewayServices(config, 'bench-assistants');
  await platform.ready;
  const { worker, connection } = await createTemporalWorker(platform, { bundle: await bundleWorkflows() });
  const running = worker.run();
  try {
    await measureTemporalFloor(temporal.address, options);
    const developer = await createDeveloperAccount(platform.db, { email: `asst-${Date.now()}@example.test`, password: 'bench password', initialCreditMicros: 10_000_000_000 });
    const caller = { developerId: developer.id, payerAccountId: developer.id, customerId: null };

    // Runs: throughput with `concurrency` created at a time, then each run's own latency one at a time.
    const assistant = await createAssistant(platform, developer.id, { model: MODEL, instructions: 'Answer briefly.' });
    const runsAt = async (count: number, concurrency: number) => {
      const threads = await Promise.all(Array.from({ length: count }, (_, i) => createThread(platform, caller, { messages: [{ role: 'user', content: `Question number ${i}: what is a gateway?` }] })));
      const { sorted, wallSeconds } = await timedAtATime(count, concurrency, async (i) => {
        const run = await createRun(platform, caller, threads[i]!.id, { assistant_id: assistant.id });
        for await (const event of platform.runEvents.follow(run.id, '0', new AbortController().signal)) {
          if (event.event === 'thread.run.completed') break;
          if (event.event.startsWith('thread.run.') && ['failed', 'cancelled', 'expired'].includes(event.event.slice(11))) throw new Error(`run ${run.id} ended ${event.event}`);
        }
      });
      const added = sorted.map((ms) => ms - options.latencyMs);
      return { count, concurrency, wallSeconds, perSecond: count / wallSeconds, p50: p(added, 0.5), p95: p(added, 0.95), p99: p(added, 0.99) };
    };
    const loaded = await runsAt(options.runs, options.concurrency);
    const alone = await runsAt(options.aloneRuns, 1);
    table(
      'assistants',
      `runs: an assistant without tools (one model call each, upstream ${options.latencyMs} ms), create to thread.run.completed; first ${options.runs} runs ${options.concurrency} at a time (throughput: every run queues behind the others), then ${options.aloneRuns} one at a time (what a run itself adds)`,
      [loaded, alone].map((measured) => ({
        runs: measured.count,
        'at a time': measured.concurrency,
        'wall s': measured.wallSeconds.toFixed(1),
        'runs/s': measured.perSecond.toFixed(1),
        'added p50 ms': measured.p50.toFixed(1),
        'added p95 ms': measured.p95.toFixed(1),
        'added p99 ms': measured.p99.toFixed(1),
      })),
    );
    goal('assistants', { figure: 'runs per second sustained', target: '≥ 100', value: loaded.perSecond.toFixed(1), met: loaded.perSecond >= 100 });
    goal('assistants', { figure: "a run's added latency, p95 (one at a time)", target: '≤ 150 ms', value: `${alone.p95.toFixed(1)} ms (${loaded.p95.toFixed(1)} ms with ${options.concurrency} at a time)`, met: alone.p95 <= 150 });

    // Conversation turns against plain completions of the same history, one after another.
    const customer = await createCustomer(platform.db, developer.id, { external_id: `bench-${Date.now()}` });
    const call: MeteredCall = { developerId: developer.id, payerAccountId: developer.id, customer: null, billableOverrideMicros: undefined, tokenCounterKeys: [], requestId: 'bench' };
    const turnCaller = { developerId: developer.id, pinnedCustomerId: null };
    const turnTimes: number[] = [];
    const plainTimes: number[] = [];
    // The first TURN_WARMUP pairs are not timed: they warm the connections' prepared statements and the code paths.
    for (let i = -TURN_WARMUP; i < options.turns; i++) {
      // A fresh conversation every 50 turns keeps the history (and the prompt) the same size for both.
      const conversation = (i + TURN_WARMUP) % 50 === 0 ? await createConversation(platform.db, turnCaller, customer.id, {}) : undefined;
      const conversationId = conversation?.id ?? currentConversation!;
      currentConversation = conversationId;
      const history = (await platform.db.query<{ role: string; content: string }>(`SELECT role, content FROM conversation_messages WHERE conversation_id = $1 ORDER BY seq`, [conversationId])).rows;
      // The plain call parses and plans its request as the gateway's route does, as the turn does.
      const plainStart = performance.now();
      const input = parseChatInput({ model: MODEL, messages: [...history, { role: 'user', content: `turn ${i}` }] }, { idempotencyKey: undefined });
      const targets = await planChat(input, resolutionContextFor(platform, developer.id), platform.providers);
      await completeChat(platform, call, input, targets, { signal: new AbortController().signal });
      const plainMs = performance.now() - plainStart;
      const turnStart = performance.now();
      await sendMessage(platform, turnCaller, call, customer.id, conversationId, { model: MODEL, content: `turn ${i}` }, new AbortController().signal);
      const turnMs = performance.now() - turnStart;
      if (i < 0) continue;
      plainTimes.push(plainMs);
      turnTimes.push(turnMs);
    }
    turnTimes.sort((a, b) => a - b);
    plainTimes.sort((a, b) => a - b);
    const addedP99 = p(turnTimes, 0.99) - p(plainTimes, 0.99);
    table('assistants', `conversation turns: ${TURN_WARMUP} warm-up then ${options.turns} timed turns one after another, each beside a plain chat completion of the same history (upstream ${options.latencyMs} ms, same metering)`, [
      { calls: options.turns, 'turn p50 ms': p(turnTimes, 0.5).toFixed(1), 'plain p50 ms': p(plainTimes, 0.5).toFixed(1), 'turn p99 ms': p(turnTimes, 0.99).toFixed(1), 'plain p99 ms': p(plainTimes, 0.99).toFixed(1), 'added p50 ms': (p(turnTimes, 0.5) - p(plainTimes, 0.5)).toFixed(1), 'added p99 ms': addedP99.toFixed(1) },
    ]);
    goal('assistants', { figure: "a conversation turn's added latency, p99", target: '≤ 5 ms', value: `${addedP99.toFixed(1)} ms`, met: addedP99 <= 5 });
  } finally {
    worker.shutdown();
    await running.catch(() => undefined);
    await connection.close();
    await platform.close();
    await stopChild(emulator);
    await stopChild(temporal.process);
  }
}

let currentConversation: string | undefined;

/**
 * The floor under the run figures: workflows that do nothing, started the same way (`concurrency`
 * at a time, then one at a time, each followed until it ends) on the same server by a worker in
 * this process. No run can be faster than these; what a run adds above them is the platform's own work.
 */
async function measureTemporalFloor(address: string, options: AssistantBenchOptions): Promise<void> {
  const taskQueue = `svc-bench-floor-${process.pid}`;
  const ended = new Map<string, () => void>();
  const connection = await NativeConnection.connect({ address });
  const worker = await Worker.create({
    connection,
    taskQueue,
    workflowBundle: await bundleWorkflowCode({ workflowsPath: fileURLToPath(new URL('./support/floor-workflows.ts', import.meta.url)), logger: quietLogger }),
    activities: { step: async (last: boolean) => void (last && ended.get(Context.current().info.workflowExecution?.workflowId ?? "")?.()) },
  });
  const running = worker.run();
  const client = new Client({ connection: await Connection.connect({ address }) });
  const rows = [];
  try {
    for (const workflowType of ['emptyWorkflow', 'runShapedWorkflow']) {
      for (const [count, concurrency] of [[options.runs, options.concurrency], [options.aloneRuns, 1]] as const) {
        const { sorted: times, wallSeconds: seconds } = await timedAtATime(count, concurrency, async (i) => {
          const workflowId = `${workflowType}-${process.pid}-${concurrency}-${i}`;
          const done = new Promise<void>((resolve) => ended.set(workflowId, resolve));
          await client.workflow.start(workflowType, { taskQueue, workflowId });
          await done;
          ended.delete(workflowId);
        });
        rows.push({
          workflow: workflowType === 'emptyWorkflow' ? 'empty (one no-op local step)' : 'run-shaped (three no-op local steps)',
          workflows: count,
          'at a time': concurrency,
          'workflows/s': (count / seconds).toFixed(1),
          'p50 ms': p(times, 0.5).toFixed(1),
          'p95 ms': p(times, 0.95).toFixed(1),
        });
      }
    }
  } finally {
    worker.shutdown();
    await running.catch(() => undefined);
    await connection.close();
    await client.connection.close();
  }
  table('assistants', 'floor: workflows that do nothing, on the same Temporal server and an in-process worker, started and followed the same way as the runs (a time is start to end)', rows);
}

const quietLogger = { trace: () => undefined, debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined, log: () => undefined };
