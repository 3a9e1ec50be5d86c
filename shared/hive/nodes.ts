import type { Queryable } from '../db/pool.js';
import { newId } from '../ids.js';
import { nodeWithRole, type HiveCredential } from './access.js';
import { hiveError } from './errors.js';
import { formatNode } from './people.js';
import * as repo from './repository.js';
import { roleOfRank } from './roles.js';

/** Depth of the deepest node: organisation 0, projects 1, then up to six levels below a project. */
const MAX_DEPTH = 7;

/** POST /v1/nodes: the part of the tree the credential reaches, parents first, with its role on each. */
export async function listReachableNodes(db: Queryable, credential: HiveCredential) {
  const nodes = await repo.reachedNodes(db, credential.tokenId);
  return { object: 'list', data: nodes.map((node) => formatNode(node, roleOfRank(node.rank))) };
}

/**
 * POST /v1/nodes/create: a child of a node the caller administers (a project under the
 * organisation, a deeper node under a project). Names are unique among siblings.
 */
export async function createNode(db: Queryable, credential: HiveCredential, input: { parent: string; name: string }) {
  const parent = await nodeWithRole(db, credential, input.parent, 'admin');
  if (parent.depth + 1 > MAX_DEPTH) throw hiveError(400, `Nodes nest at most ${MAX_DEPTH} levels below the organisation.`);
  const node = await repo.insertChildNode(db, { id: newId('nd_'), parent, name: input.name, createdBy: credential.personId ?? credential.tokenId });
  if (!node) throw hiveError(409, `${parent.name_path}/${input.name} already exists.`);
  return formatNode(node, roleOfRank(parent.rank));
}
