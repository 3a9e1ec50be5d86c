import type { Db, Queryable } from '../../db/pool.js';
import { requireOrganisationAdmin, type HiveCredential } from '../access.js';
import { hiveError } from '../errors.js';
import { listMachines, revokeMachine } from '../machines.js';
import { getMemory } from '../memories.js';
import * as hiveRepo from '../repository.js';
import { rankOf, roleOfRank, type Role } from '../roles.js';
import * as repo from './repository.js';
import type { SignedIn } from './sessions.js';

/**
 * What the dashboard's pages show, read with the signed-in person's session token: the same
 * reach-scoped queries and domain functions as the API, so a page can show nothing the person's
 * grant does not reach. The organisation's account sections (billing, people, credentials) need
 * admin on the organisation itself, its root node.
 */
const CREDENTIALS_SHOWN = 200;
const MEMORIES_SHOWN = 100;

export interface NodeView {
  id: string;
  path: string;
  depth: number;
  role: Role;
}

export interface OrganisationView {
  organisation: { id: string; name: string };
  email: string;
  /** The nodes the person reaches, with their role on each: the signed-in grant. */
  nodes: NodeView[];
  /** Admin (or owner) of the organisation: sees the account sections. */
  admin: boolean;
  /** Admin somewhere: may approve device codes there. */
  approver: boolean;
  seats: number;
  people: repo.PersonRow[] | null;
  credentials: repo.CredentialRow[] | null;
  /** The organisation's machines, revoked and expired ones included (for an admin). */
  machines: Awaited<ReturnType<typeof listMachines>>['machines'] | null;
}

export async function organisationView(db: Db, signedIn: SignedIn): Promise<OrganisationView> {
  const { credential } = signedIn;
  const [name, reached, seats] = await Promise.all([
    hiveRepo.organisationName(db, credential.orgId),
    hiveRepo.reachedNodes(db, credential.tokenId),
    repo.seatCount(db, credential.orgId),
  ]);
  const nodes = reached.map(nodeView);
  const admin = reached.some((node) => node.parent_id === null && node.rank >= rankOf('admin'));
  const [people, credentials, machines] = admin
    ? await Promise.all([
        repo.peopleOfOrganisation(db, credential.orgId),
        repo.liveCredentials(db, credential.orgId, CREDENTIALS_SHOWN),
        listMachines(db, credential).then((listed) => listed.machines),
      ])
    : [null, null, null];
  return {
    organisation: { id: credential.orgId, name },
    email: signedIn.email,
    nodes,
    admin,
    approver: reached.some((node) => node.rank >= rankOf('admin')),
    seats,
    people,
    credentials,
    machines,
  };
}

export interface BrowseView {
  nodes: NodeView[];
  /** The node asked for: undefined for the whole grant, null when it lies outside (or nowhere). */
  selected: NodeView | null | undefined;
  memories: repo.BrowsedMemoryRow[];
  limit: number;
}

/**
 * GET /dashboard/browse: the nodes of the grant and its current memories, or those of one node
 * and what lies below it. A node outside the grant answers exactly as one that does not exist:
 * nothing at all.
 */
export async function browseView(db: Db, credential: HiveCredential, nodeRef: string | undefined): Promise<BrowseView> {
  const nodes = (await hiveRepo.reachedNodes(db, credential.tokenId)).map(nodeView);
  if (nodeRef === undefined) {
    return { nodes, selected: undefined, memories: await repo.memoriesToBrowse(db, credential.tokenId, null, MEMORIES_SHOWN), limit: MEMORIES_SHOWN };
  }
  const node = await hiveRepo.reachedNode(db, credential.tokenId, nodeRef);
  if (!node) return { nodes, selected: null, memories: [], limit: MEMORIES_SHOWN };
  return { nodes, selected: nodeView(node), memories: await repo.memoriesToBrowse(db, credential.tokenId, node.path, MEMORIES_SHOWN), limit: MEMORIES_SHOWN };
}

/** GET /dashboard/memory: one memory as POST /v1/memory/get answers it (404 outside the grant). */
export function memoryView(db: Queryable, credential: HiveCredential, id: string) {
  return getMemory(db, credential, id);
}

/**
 * POST /dashboard/revoke: a token (`tok_…`) or a machine (`mch_…`, its token with it) of the
 * caller's own organisation; one of another organisation is not found.
 */
export async function revokeCredential(db: Db, credential: HiveCredential, id: string) {
  await requireOrganisationAdmin(db, credential, 'This needs the admin role on the organisation.');
  if (id.startsWith('mch_')) return revokeMachine(db, credential, id);
  if (!(await repo.revokeTokenInOrganisation(db, credential.orgId, id))) throw hiveError(404, `No live credential ${id} in this organisation.`);
  return { id, revoked: true };
}

function nodeView(node: hiveRepo.ReachedNodeRow): NodeView {
  return { id: node.id, path: node.name_path, depth: node.depth, role: roleOfRank(node.rank) };
}
