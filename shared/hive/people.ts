import { hashPassword } from '../accounts/passwords.js';
import type { HiveServices } from '../composition/hive.js';
import { withTransaction, type Queryable } from '../db/pool.js';
import { newId } from '../ids.js';
import { nodeWithRole, requirePerson, type HiveCredential } from './access.js';
import { hiveError } from './errors.js';
import * as repo from './repository.js';
import { rankOf, roleOfRank, type Role } from './roles.js';
import { userModel } from './traits.js';
import { openSignupWallet } from './wallet.js';
import { mintDeviceCodes, mintToken, hashSecret, normaliseUserCode } from './tokens.js';

/**
 * People and their credentials: signup (an organisation and its owner), passwords, tokens of a
 * person or of a grant, revocation, whoami, and the device flow that admits a person.
 */

const SIGNUP_WINDOW_SECONDS = 3_600;
const DEVICE_CODE_LIFETIME_MS = 15 * 60_000;
/** How often a client should poll a device code (seconds); said in the start answer. */
const DEVICE_POLL_INTERVAL = 5;

export interface SignupInput {
  email: string;
  password: string;
  organisation: string;
}

/**
 * Signup: an organisation made by whoever asks (createOrganisation), only when the operator enabled
 * signup. Every attempt from a client address counts against HIVE_SIGNUP_PER_HOUR (in the database,
 * so all replicas share the count), refused ones included, so addresses cannot be probed in bulk.
 */
export async function signup(hive: Pick<HiveServices, 'db' | 'config'>, input: SignupInput, clientAddress: string) {
  if (!hive.config.HIVE_SIGNUP_ENABLED) throw hiveError(404, 'Signup is not enabled on this server.');
  const window = await repo.countInWindow(hive.db, `signup:${clientAddress}`, SIGNUP_WINDOW_SECONDS);
  if (window.count > hive.config.HIVE_SIGNUP_PER_HOUR) {
    throw hiveError(429, `Too many signups from this address; try again after ${window.resetsAt.toISOString()}.`);
  }
  return createOrganisation(hive, input);
}

/**
 * Creates an organisation (its root node named as asked, its wallet with HIVE_SIGNUP_CREDIT_USD),
 * its owner with both authorities, the owner's password and a first token, shown once. Signup
 * calls it once its gate passed; the operator CLI (`npm run admin -- create-hive-organisation`)
 * calls it directly, so a hive started without signup can still be entered.
 */
export async function createOrganisation(hive: Pick<HiveServices, 'db' | 'config'>, input: SignupInput) {
  const passwordHash = await hashPassword(input.password);
  return withTransaction(hive.db, async (client) => {
    if (await repo.personIdByEmail(client, input.email)) throw hiveError(409, 'This address already has an account.');
    const orgId = newId('org_');
    const personId = newId('per_');
    await repo.insertOrganisation(client, { id: orgId, name: input.organisation });
    await openSignupWallet(client, hive.config, orgId);
    const root = await repo.insertRootNode(client, { id: newId('nd_'), orgId, name: input.organisation, createdBy: personId });
    // A concurrent signup of the same address loses here, on the unique address.
    if (!(await repo.insertPerson(client, { id: personId, orgId, email: input.email, passwordHash, guardrailAuthority: true, axiomAuthority: true }))) {
      throw hiveError(409, 'This address already has an account.');
    }
    await repo.upsertRoleGrant(client, { personId, nodeId: root.id, role: 'owner', grantedBy: personId });
    const token = await issueToken(client, { orgId, personId, grant: null, name: 'signup', createdBy: personId, expiresAt: null });
    return {
      organisation: { id: orgId, name: input.organisation },
      node: formatNode(root, 'owner'),
      person: { id: personId, email: input.email, role: 'owner' as Role, guardrail_authority: true, axiom_authority: true },
      token,
    };
  });
}

/** Sets the password of the token's person (the one that enrols a machine, and the dashboard sign-in). */
export async function setPassword(db: Queryable, credential: HiveCredential, password: string) {
  const personId = requirePerson(credential);
  await repo.setPasswordHash(db, personId, await hashPassword(password));
  return { person_id: personId, password_set: true };
}

/** Revokes the token the request arrived with; its next use is 401. */
export async function revokeOwnToken(db: Queryable, credential: HiveCredential) {
  const revokedAt = await repo.revokeToken(db, credential.tokenId);
  return { id: credential.tokenId, revoked: true, revoked_at: (revokedAt ?? new Date()).toISOString() };
}

export interface GrantTokenInput {
  node: string;
  role: Role;
  name?: string;
  expires_in_days?: number;
}

/**
 * A token with a grant of its own (an agent, CI): a node and a role, no person. Minted by an
 * admin of the node, never above the minter's own role there; it keeps its grant whatever later
 * happens to the minter's roles, until revoked or expired.
 */
export async function createGrantToken(db: Queryable, credential: HiveCredential, input: GrantTokenInput) {
  const node = await nodeWithRole(db, credential, input.node, 'admin');
  if (rankOf(input.role) > node.rank) throw hiveError(403, `A token cannot carry more than your own role on ${node.name_path} (${roleOfRank(node.rank)}).`);
  const expiresAt = input.expires_in_days ? new Date(Date.now() + input.expires_in_days * 86_400_000) : null;
  const token = await issueToken(db, {
    orgId: credential.orgId,
    personId: null,
    grant: { nodeId: node.id, role: input.role },
    name: input.name ?? null,
    createdBy: credential.personId ?? credential.tokenId,
    expiresAt,
  });
  return { ...token, grant: { node: formatNode(node, input.role), role: input.role }, expires_at: expiresAt?.toISOString() ?? null };
}

/** A new token, shown once here: only its SHA-256 is stored. */
export async function issueToken(db: Queryable, token: Omit<repo.InsertToken, 'id' | 'hash' | 'displayPrefix'>) {
  const minted = mintToken();
  const id = newId('tok_');
  const { created_at } = await repo.insertToken(db, { ...token, id, hash: minted.hash, displayPrefix: minted.displayPrefix });
  return { id, token: minted.plaintext, prefix: minted.displayPrefix, created_at: created_at.toISOString() };
}

/** Who the credential is: its token, its person and their grants (read now), or the token's own grant. */
export async function whoami(db: Queryable, credential: HiveCredential) {
  const organisation = { id: credential.orgId, name: await repo.organisationName(db, credential.orgId) };
  const token = { id: credential.tokenId, kind: credential.personId ? ('person' as const) : ('grant' as const) };
  if (credential.personId) {
    const grants = await repo.grantsOfPerson(db, credential.personId);
    return {
      organisation,
      token,
      person: { id: credential.personId, email: credential.email, guardrail_authority: credential.guardrailAuthority, axiom_authority: credential.axiomAuthority },
      grants: grants.map((grant) => ({ node: { id: grant.node_id, path: grant.name_path }, role: grant.role })),
      // The per-person user model: each line with the evidence it rests on (/v1/traits writes it).
      traits: await userModel(db, credential.personId),
    };
  }
  const node = await repo.nodeById(db, credential.grant!.nodeId);
  return { organisation, token, person: null, grants: [{ node: { id: node!.id, path: node!.name_path }, role: credential.grant!.role }], traits: [] };
}

/** Hands out a device code and a user code, and nothing else (spec 3). */
export async function startDeviceFlow(hive: Pick<HiveServices, 'db' | 'config'>) {
  const expiresAt = new Date(Date.now() + DEVICE_CODE_LIFETIME_MS);
  // A user code collision (20^8 codes) is retried with a fresh pair.
  for (;;) {
    const { deviceCode, userCode } = mintDeviceCodes();
    if (await repo.insertDeviceCode(hive.db, { id: newId('dev_'), deviceCodeHash: deviceCode.hash, userCode, expiresAt })) {
      return {
        device_code: deviceCode.plaintext,
        user_code: userCode,
        verification_uri: `${hive.config.hiveBaseUrl}/v1/device`,
        expires_in: DEVICE_CODE_LIFETIME_MS / 1000,
        interval: DEVICE_POLL_INTERVAL,
      };
    }
  }
}

export interface DeviceApproveInput {
  code: string;
  email: string;
  node: string;
  role: Role;
  guardrail?: boolean;
  axiom?: boolean;
}

/**
 * Admits a person: the approver needs admin on the node and cannot grant above their own role
 * there; only an owner holding guardrail (axiom) authority passes that authority on. The person
 * is made in the approver's organisation if the address is new; a second approval of the same
 * person replaces their role on that node. The code then yields a token of that person at its next poll.
 */
export async function approveDevice(db: HiveServices['db'], credential: HiveCredential, input: DeviceApproveInput) {
  const node = await nodeWithRole(db, credential, input.node, 'admin');
  if (rankOf(input.role) > node.rank) throw hiveError(403, `You cannot grant more than your own role on ${node.name_path} (${roleOfRank(node.rank)}).`);
  if (input.guardrail && !(node.rank >= rankOf('owner') && credential.guardrailAuthority)) throw hiveError(403, 'Passing on guardrail authority needs an owner who holds it.');
  if (input.axiom && !(node.rank >= rankOf('owner') && credential.axiomAuthority)) throw hiveError(403, 'Passing on axiom authority needs an owner who holds it.');
  return withTransaction(db, async (client) => {
    const code = await repo.pendingDeviceCodeForUpdate(client, normaliseUserCode(input.code));
    if (!code || code.person_id) throw hiveError(404, 'No pending device code matches; it may have expired or been used.');
    const approver = credential.personId ?? credential.tokenId;
    const person = await admitPerson(client, credential.orgId, { ...input, nodeId: node.id }, approver);
    await repo.approveDeviceCode(client, code.id, person.id, approver);
    return { approved: true, person, grant: { node: formatNode(node, input.role), role: input.role } };
  });
}

/**
 * The person of `email` in `orgId` (made there if the address is new, without a password) with
 * `role` on the node, replacing a role they held there, and the authorities passed on. Whoever
 * calls it has checked that the admission is theirs to make: device approval (an admin of the
 * node) or the operator CLI. Runs inside the caller's transaction.
 */
export async function admitPerson(
  client: Queryable,
  orgId: string,
  input: { email: string; nodeId: string; role: Role; guardrail?: boolean; axiom?: boolean },
  grantedBy: string | null,
) {
  let person = await repo.personIdByEmail(client, input.email);
  if (person && person.org_id !== orgId) throw hiveError(409, 'This address has an account in another organisation.');
  if (!person) {
    const id = newId('per_');
    if (!(await repo.insertPerson(client, { id, orgId, email: input.email, passwordHash: null, guardrailAuthority: false, axiomAuthority: false }))) {
      throw hiveError(409, 'This address has an account in another organisation.');
    }
    person = { id, org_id: orgId };
  }
  await repo.upsertRoleGrant(client, { personId: person.id, nodeId: input.nodeId, role: input.role, grantedBy });
  const authority = await repo.grantAuthority(client, person.id, { guardrail: input.guardrail, axiom: input.axiom });
  return { id: person.id, email: input.email, ...authority };
}

/** Pending until approved; then the person's token, once: the code is gone after that poll. */
export async function pollDevice(db: HiveServices['db'], deviceCode: string) {
  return withTransaction(db, async (client) => {
    const code = await repo.deviceCodeByHashForUpdate(client, hashSecret(deviceCode));
    if (!code) throw hiveError(404, 'Unknown device code (a code yields its token once).');
    if (code.expired) {
      await repo.deleteDeviceCode(client, code.id);
      return { status: 'expired' as const };
    }
    if (!code.person_id) return { status: 'pending' as const };
    await repo.deleteDeviceCode(client, code.id);
    const token = await issueToken(client, { orgId: code.org_id!, personId: code.person_id, grant: null, name: 'device', createdBy: code.person_id, expiresAt: null });
    return { status: 'approved' as const, ...token };
  });
}

/** A node as routes answer it. */
export function formatNode(node: repo.NodeRow, role?: Role) {
  return {
    id: node.id,
    name: node.name,
    path: node.name_path,
    parent_id: node.parent_id,
    kind: node.depth === 0 ? 'organisation' : node.depth === 1 ? 'project' : 'node',
    ...(role && { role }),
  };
}
