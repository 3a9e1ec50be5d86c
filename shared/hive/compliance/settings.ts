import { withTransaction, type Db, type Queryable } from '../../db/pool.js';
import { nodeWithRole, type HiveCredential } from '../access.js';
import type { ReachedNodeRow } from '../repository.js';
import { DEFAULT_AUDIT_ROW_DAYS, replaceSettings, settingsInForce, insertAudit } from './repository.js';
import type { SettingsRecord } from './schemas.js';

/**
 * A node's settings record (POST /v1/admin/settings, admin on the node): its retention map, its
 * sensitivity and its audit-row lifetime. A node without a record of its own has its nearest
 * ancestor's, the organisation's root without one the defaults. Replacing takes the whole record
 * (the body's schema has no optional field), written with its audit row in one transaction.
 */
export const DEFAULT_SETTINGS: SettingsRecord = { retention: [], sensitivity: 'internal', audit_row_days: DEFAULT_AUDIT_ROW_DAYS };

export async function nodeSettings(db: Db, credential: HiveCredential, input: { node: string; settings?: SettingsRecord }) {
  const node = await nodeWithRole(db, credential, input.node, 'admin');
  if (input.settings) {
    const record = input.settings;
    await withTransaction(db, async (client) => {
      const previous = await settingsInForce(client, node.id);
      await replaceSettings(client, { nodeId: node.id, orgId: node.org_id, retention: record.retention, sensitivity: record.sensitivity, auditRowDays: record.audit_row_days, personId: credential.personId, tokenId: credential.tokenId });
      await insertAudit(client, [{
        orgId: node.org_id, nodeId: node.id, action: 'settings.replaced', personId: credential.personId, tokenId: credential.tokenId,
        detail: { previous: previous ? { from: previous.node_id, retention: previous.retention, sensitivity: previous.sensitivity, audit_row_days: previous.audit_row_days } : null, settings: record },
      }]);
    });
  }
  return settingsView(db, node);
}

async function settingsView(db: Queryable, node: ReachedNodeRow) {
  const found = await settingsInForce(db, node.id);
  return {
    node: { id: node.id, path: node.name_path },
    settings: found ? { retention: found.retention, sensitivity: found.sensitivity, audit_row_days: found.audit_row_days } : DEFAULT_SETTINGS,
    /** Whose record is in force: this node's, an ancestor's, or none (the defaults). */
    source: found ? (found.node_id === node.id ? 'own' : 'inherited') : 'default',
    from: found ? { id: found.node_id, path: found.node_path } : null,
    updated_at: found?.updated_at.toISOString() ?? null,
    updated_by: found?.updated_by ?? null,
  };
}
