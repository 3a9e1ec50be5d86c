import type { Db, Queryable } from '../db/pool.js';
import { withTransaction } from '../db/pool.js';
import { microsToUsd } from '../money.js';
import { personInOrg } from './compliance/repository.js';
import { hiveError } from './errors.js';
import { admitPerson, formatNode, issueToken } from './people.js';
import * as repo from './repository.js';
import type { Role } from './roles.js';

/**
 * What the platform's operator does to the hive with no token of it (`npm run admin -- …`,
 * scripts/admin.ts): list the organisations, admit a person, mint a person's token. The operator
 * holds the database, so no role is checked; each act is the one a route makes for an admin
 * (admitPerson as device approval, issueToken as the device poll). Making an organisation is
 * signup's createOrganisation (people.ts), crediting a wallet creditByOperator (wallet.ts).
 */

export async function listOrganisations(db: Queryable) {
  const rows = await repo.listOrganisations(db);
  return {
    object: 'list' as const,
    data: rows.map((row) => ({
      id: row.id,
      name: row.name,
      root_node_id: row.root_node_id,
      people: row.people,
      balance_usd: microsToUsd(row.balance_micros),
      suspended: BigInt(row.balance_micros) === 0n,
      created_at: row.created_at.toISOString(),
    })),
  };
}

export interface OperatorAdmission {
  orgId: string;
  email: string;
  /** A node of the organisation (id or name path); null: its root node. */
  node: string | null;
  role: Role;
}

/** A person admitted to a node of the organisation (made if the address is new), as device approval admits one. */
export async function addPerson(db: Db, input: OperatorAdmission) {
  const node = await repo.nodeOfOrganisation(db, input.orgId, input.node);
  if (!node) throw hiveError(404, input.node ? `No node ${input.node} in organisation ${input.orgId}.` : `No organisation ${input.orgId}.`);
  const person = await withTransaction(db, (client) => admitPerson(client, input.orgId, { email: input.email, nodeId: node.id, role: input.role }, null));
  return { organisation: { id: input.orgId }, person, grant: { node: formatNode(node, input.role), role: input.role } };
}

/** A new token of a person of the organisation (named by `per_…` id or address), shown once. */
export async function createPersonToken(db: Queryable, input: { orgId: string; person: string; name: string }) {
  const person = await personInOrg(db, input.orgId, input.person.includes('@') ? input.person.toLowerCase() : input.person);
  if (!person) throw hiveError(404, `No person ${input.person} in organisation ${input.orgId}.`);
  const token = await issueToken(db, { orgId: input.orgId, personId: person.id, grant: null, name: input.name, createdBy: null, expiresAt: null });
  return { organisation: { id: input.orgId }, person, token };
}
