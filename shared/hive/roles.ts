/**
 * Roles on a node, lowest first; a role on a node holds on every node below it. What each allows:
 * reader reads (recall, get, events, nodes); member also writes memories and events; admin also
 * makes nodes, admits people and mints grant tokens on its nodes; owner also passes on owner and
 * the guardrail and axiom authorities.
 */
export const ROLES = ['reader', 'member', 'admin', 'owner'] as const;
export type Role = (typeof ROLES)[number];

/** reader 1 ... owner 4, as the reach CTE ranks them in SQL (repository.ts). */
export const rankOf = (role: Role): number => ROLES.indexOf(role) + 1;
export const roleOfRank = (rank: number): Role => ROLES[rank - 1]!;
