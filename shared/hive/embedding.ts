import type { Config } from '../config.js';
import type { Db } from '../db/pool.js';
import type { Logger } from '../logger.js';
import { catalogModel, type CatalogModel } from '../models/catalog.js';
import type { ConsumerDefinition, QueueRegistry } from '../platform/queues.js';
import type { EmbeddingsResult } from '../providers/types.js';
import type { ProviderRegistry } from '../providers/registry.js';
import { contentToEmbed, storeEmbedding } from './memory-repository.js';
import { chargeEmbedding } from './metering.js';

/**
 * Memories are embedded asynchronously: a write commits, is searchable by text at once, and
 * queues one BullMQ job; the worker process embeds the version the job names with
 * HIVE_EMBEDDING_MODEL through the gateway's provider adapters, and the memory is then found by
 * meaning too. A job whose version was overtaken or forgotten does nothing (the newer write has
 * its own job). Each embedding stored is charged to the memory's organisation by the tokens it took.
 */
export const HIVE_EMBED_QUEUE = 'hive-embed';

export interface HiveEmbedJob {
  memoryId: string;
  version: number;
}

export interface EmbeddingDeps {
  db: Db;
  config: Pick<Config, 'HIVE_EMBEDDING_MODEL' | 'HIVE_PRICE_REMEMBER_MICROS' | 'HIVE_PRICE_RECALL_MICROS' | 'HIVE_PRICE_EMBED_MICROS_PER_1K_TOKENS'>;
  providers: ProviderRegistry;
  logger: Logger;
}

/** Queues the embedding of one memory version. A failure to queue is logged: the memory stays searchable by text. */
export async function queueEmbedding(queues: QueueRegistry, job: HiveEmbedJob, logger: Logger): Promise<void> {
  try {
    await queues.queue<HiveEmbedJob>(HIVE_EMBED_QUEUE).add('embed', job, {
      jobId: `${job.memoryId}-v${job.version}`,
      attempts: 8,
      backoff: { type: 'exponential', delay: 1_000 },
      removeOnComplete: true,
      removeOnFail: 1_000,
    });
  } catch (error) {
    logger.warn({ err: error, memory: job.memoryId, version: job.version }, 'could not queue a hive embedding; the memory is searchable by text only until embedded');
  }
}

/** Embeds one memory version; says what happened (a stale or forgotten version is skipped). */
export async function embedMemory(deps: EmbeddingDeps, job: HiveEmbedJob): Promise<'embedded' | 'stale'> {
  const content = await contentToEmbed(deps.db, job.memoryId);
  if (!content || content.forgotten || content.version !== job.version) return 'stale';
  const model = hiveEmbeddingModel(deps.config);
  const { embeddings, usage } = await embedWith(deps.providers, model, [embeddingText(content)], AbortSignal.timeout(60_000));
  if (!(await storeEmbedding(deps.db, job.memoryId, job.version, model.id, embeddings[0]!))) return 'stale';
  await chargeEmbedding(deps.db, deps.config, content.orgId, job.memoryId, usage.inputTokens);
  return 'embedded';
}

/** The hive's BullMQ consumer, run by the worker process. */
export function hiveEmbeddingConsumer(deps: EmbeddingDeps): ConsumerDefinition<HiveEmbedJob> {
  return {
    queue: HIVE_EMBED_QUEUE,
    process: async (job) => ({ result: await embedMemory(deps, job.data) }),
    options: { concurrency: 4 },
  };
}

export function hiveEmbeddingModel(config: Pick<Config, 'HIVE_EMBEDDING_MODEL'>): CatalogModel {
  const model = catalogModel(config.HIVE_EMBEDDING_MODEL);
  if (model?.kind !== 'embedding') throw new Error(`HIVE_EMBEDDING_MODEL ${config.HIVE_EMBEDDING_MODEL} is not an embedding model of the catalog`);
  return model;
}

/** Texts through the provider adapter of the model (the gateway's own, so the emulator stands in offline). */
export async function embedWith(providers: ProviderRegistry, model: CatalogModel, input: string[], signal: AbortSignal): Promise<EmbeddingsResult> {
  const adapter = providers.adapter(model.provider);
  if (!adapter?.embeddings) throw new Error(`no upstream credentials are configured for ${model.provider}, which serves ${model.id}`);
  return adapter.embeddings({ model, upstreamModel: model.model, input, signal });
}

/** What a memory is embedded as: its title, then its body. */
export function embeddingText(memory: { title: string; body: string }): string {
  return memory.body ? `${memory.title}\n\n${memory.body}` : memory.title;
}
