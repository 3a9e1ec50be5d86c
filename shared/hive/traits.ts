import { withTransaction, type Db, type Queryable } from '../db/pool.js';
import { newId } from '../ids.js';
import { requirePerson, type HiveCredential } from './access.js';
import { hiveError } from './errors.js';
import { memoryInReach } from './memory-repository.js';
import { requireNotSuspended } from './metering.js';
import { normaliseTrait, type TraitsInput } from './schemas.js';
import * as repo from './trait-repository.js';

/**
 * The per-person user model (POST /v1/traits, and `traits` in /v1/whoami): lines such as
 * "prefers small pull requests", each with the evidence it rests on (what was seen, and the memory
 * or event that shows it). It belongs to the token's person: an agent acting for them records what
 * it learns, the person reads and drops lines. Saying a trait again adds evidence to its line.
 * A token carrying a grant of its own has no person, and is refused (403).
 */
export async function traitsAction(db: Db, credential: HiveCredential, input: TraitsInput) {
  const personId = requirePerson(credential);
  if (input.action !== 'list') await requireNotSuspended(db, credential.orgId);
  switch (input.action) {
    case 'list':
      return { object: 'list', data: await userModel(db, personId) };
    case 'add':
      return addTrait(db, credential, personId, input);
    case 'drop':
      if (!(await repo.deleteTrait(db, personId, input.id))) throw hiveError(404, `No trait ${input.id} of this person.`);
      return { id: input.id, object: 'trait', deleted: true };
  }
}

async function addTrait(db: Db, credential: HiveCredential, personId: string, input: Extract<TraitsInput, { action: 'add' }>) {
  const { evidence } = input;
  if (evidence.memory) {
    const memory = await memoryInReach(db, credential.tokenId, evidence.memory);
    if (!memory || memory.forgotten_at) throw hiveError(404, `No memory ${evidence.memory}.`);
  }
  if (evidence.event && !(await repo.eventInReach(db, credential.tokenId, evidence.event))) throw hiveError(404, `No event ${evidence.event}.`);
  const trait = await withTransaction(db, async (client) => {
    const trait = await repo.upsertTrait(client, { id: newId('trt_'), orgId: credential.orgId, personId, trait: input.trait, traitKey: normaliseTrait(input.trait) });
    await repo.insertEvidence(client, {
      id: newId('tev_'), traitId: trait.id, text: evidence.text, memoryId: evidence.memory ?? null, eventId: evidence.event ?? null,
      source: evidence.source ?? null, personId: credential.personId, tokenId: credential.tokenId,
    });
    return trait;
  });
  const [line] = await userModel(db, personId, trait.id);
  return { result: trait.created ? ('created' as const) : ('evidence_added' as const), trait: line! };
}

/** A person's traits, each with its evidence, as /v1/traits and /v1/whoami answer them. */
export async function userModel(db: Queryable, personId: string, traitId?: string) {
  const rows = await repo.traitsOfPerson(db, personId, traitId);
  return rows.map((row) => ({
    id: row.id,
    object: 'trait',
    trait: row.trait,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
    evidence: row.evidence.map((item) => ({
      id: item.id,
      text: item.text,
      memory_id: item.memory_id,
      event_id: item.event_id,
      source: item.source,
      recorded: { by: item.recorded_by, token_id: item.recorded_token, at: new Date(item.recorded_at).toISOString() },
    })),
  }));
}
