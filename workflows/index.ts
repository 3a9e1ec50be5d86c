/**
 * Every Temporal workflow of the platform is exported from this file; the worker bundles it once
 * at start. Workflow code is deterministic: it imports only @temporalio/workflow and `import type`
 * of activities, never shared/ runtime code. Batches, webhook delivery, reindex and the other long
 * operations of the specs add their workflows here.
 */
export { webhookDeliveryWorkflow } from './webhook-delivery.js';
export { batchWorkflow } from './batch.js';
export { vectorStoreDeletionWorkflow } from './vector-store-deletion.js';
export { vectorStoreMigrationWorkflow } from './vector-store-migration.js';
export { assistantRunWorkflow } from './assistant-run.js';
export { brainDeletionWorkflow } from './brain-deletion.js';
export { brainReindexWorkflow } from './brain-reindex.js';
export { brainConsolidationWorkflow, brainLearnWorkflow, brainPruneWorkflow } from './brain-learn.js';
export { packBuildWorkflow } from './pack-build.js';
export { packMaterializeWorkflow } from './pack-materialize.js';
export { hiveRetentionWorkflow } from './hive-retention.js';
export { hiveErasureWorkflow } from './hive-erasure.js';
export { hiveEmbedSweepWorkflow } from './hive-embed-sweep.js';
export { hiveAdminChangeWorkflow } from './hive-admin-change.js';
