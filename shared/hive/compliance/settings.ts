import { contentHash } from '../../content-hash.js';
import { withTransaction, type Db, type Queryable } from '../../db/pool.js';
import { newId } from '../../ids.js';
import { nodeWithRole, type HiveCredential } from '../access.js';
import type { ReachedNodeRow } from '../repository.js';
import { runAdminChange, type ComplianceServices, type HiveAdminChange } from './jobs.js';
import { auditedChange, DEFAULT_AUDIT_ROW_DAYS, insertAudit, lockOrganisationHolds, replaceSettings, settingsInForce, type SettingsRow } from './repository.js';
import type { SettingsRecord } from './schemas.js';

/**
 * A node's settings record (POST /v1/admin/settings, admin on the node): its retention map, its
 * sensitivity and its audit-row lifetime. A node without a record of its own has its nearest
 * ancestor's, the organisation's root without one the defaults. Replacing takes the whole record
 * (the body's schema has no optional field) and runs as a workflow (hiveAdminChangeWorkflow,
 * readable in the Web UI) that writes it with its audit row in one transaction, once.
 */
export const DEFAULT_SETTINGS: SettingsRecord = { retention: [], sensitivity: 'internal', audit_row_days: DEFAULT_AUDIT_ROW_DAYS };

export async function nodeSettings(services: ComplianceServices, credential: HiveCredential, input: { node: string; settings?: SettingsRecord }) {
  const node = await nodeWithRole(services.db, credential, input.node, 'admin');
  if (input.settings) {
    await runAdminChange(services, {
      kind: 'settings.replace', changeId: newId('chg_'), orgId: node.org_id, nodeId: node.id, settings: input.settings, by: { personId: credential.personId, tokenId: credential.tokenId },
    });
  }
  return settingsView(services.db, node);
}

/**
 * The step of a replacement: the record and its audit row, once (the audit row names the change).
 * A record the node has as its own already is left as it is, without an audit row: that is the
 * same request sent again after its change was made.
 */
export async function replaceNodeSettings(db: Db, change: Extract<HiveAdminChange, { kind: 'settings.replace' }>): Promise<void> {
  await withTransaction(db, async (client) => {
    // The organisation's compliance lock: a step still running when its retry starts cannot write twice.
    await lockOrganisationHolds(client, [change.orgId]);
    if (await auditedChange(client, change.orgId, change.changeId)) return;
    const previous = await settingsInForce(client, change.nodeId);
    const record = change.settings;
    if (previous?.node_id === change.nodeId && contentHash(recordOf(previous)) === contentHash(record)) return;
    await replaceSettings(client, { nodeId: change.nodeId, orgId: change.orgId, retention: record.retention, sensitivity: record.sensitivity, auditRowDays: record.audit_row_days, ...change.by });
    await insertAudit(client, [{
      orgId: change.orgId, nodeId: change.nodeId, action: 'settings.replaced', ...change.by,
      detail: { change: change.changeId, previous: previous ? { from: previous.node_id, retention: previous.retention, sensitivity: previous.sensitivity, audit_row_days: previous.audit_row_days } : null, settings: record },
    }]);
  });
}

const recordOf = (row: SettingsRow): SettingsRecord => ({ retention: row.retention, sensitivity: row.sensitivity, audit_row_days: row.audit_row_days });

async function settingsView(db: Queryable, node: ReachedNodeRow) {
  const found = await settingsInForce(db, node.id);
  return {
    node: { id: node.id, path: node.name_path },
    settings: found ? recordOf(found) : DEFAULT_SETTINGS,
    /** Whose record is in force: this node's, an ancestor's, or none (the defaults). */
    source: found ? (found.node_id === node.id ? 'own' : 'inherited') : 'default',
    from: found ? { id: found.node_id, path: found.node_path } : null,
    updated_at: found?.updated_at.toISOString() ?? null,
    updated_by: found?.updated_by ?? null,
  };
}
