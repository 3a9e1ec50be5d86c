import type { HiveServices } from '../composition/hive.js';
import { nodeWithRole, type HiveCredential } from './access.js';
import { EXPORT_CURSORS, beginExport, cursorPages, type ExportRecordType } from './export-repository.js';
import { readSchemaVersion } from './repository.js';

/** Rows fetched from a cursor at a time: small enough that a huge project never sits in memory. */
const PAGE_SIZE = 500;

/**
 * POST /v1/export: every node, memory (tombstones and superseded ones too, with every provenance
 * field), earlier version, link, event and task of a node and what lies below it (a project, or
 * the organisation from its root), as JSON lines: a header, the records by type, and a trailer
 * with the counts (a stream without its trailer was cut short). Reader on the node is enough: it
 * is what a reader can read one by one. Nothing here depends on billing, so it works while an
 * organisation is suspended or its wallet empty.
 */
export async function* exportRecords(hive: Pick<HiveServices, 'db'>, credential: HiveCredential, input: { node: string }): AsyncGenerator<Record<string, unknown>> {
  const node = await nodeWithRole(hive.db, credential, input.node, 'reader');
  const client = await hive.db.connect();
  let committed = false;
  try {
    await beginExport(client, credential.tokenId, node.path);
    const schema = await readSchemaVersion(client);
    yield { type: 'export', format: 1, schema, node: { id: node.id, path: node.name_path }, exported_at: new Date().toISOString() };
    const counts = {} as Record<ExportRecordType, number>;
    for (const type of Object.keys(EXPORT_CURSORS) as ExportRecordType[]) {
      counts[type] = 0;
      for await (const rows of cursorPages(client, type, PAGE_SIZE)) {
        counts[type] += rows.length;
        for (const row of rows) yield { type, ...row };
      }
    }
    yield { type: 'end', counts };
    await client.query('COMMIT');
    committed = true;
  } finally {
    // A failure, or a reader that stopped early (the client went away), leaves the snapshot open: end it here.
    if (!committed) await client.query('ROLLBACK').catch(() => undefined);
    client.release();
  }
}
