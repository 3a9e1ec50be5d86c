-- Up Migration

-- Learning (spec 2): observe passes, the entity graph, review proposals, conflicts and autotune.

-- One learn pass (an observe call or an ambient turn), keyed by its Temporal workflow id, so a
-- retried observe finds the pass it started. `recalled` and `used` are the native memories
-- recalled into the turn and those the answer used: autotune learns tier weights from them.
CREATE TABLE brain_learn_passes (
  id                text PRIMARY KEY CHECK (id ~ '^blp_[0-9A-Za-z_-]{43}$'),
  brain_id          text NOT NULL REFERENCES brains (id) ON DELETE CASCADE,
  developer_id      uuid NOT NULL REFERENCES accounts (id),
  -- Who pays for the pass's model calls: the payer the request named, or (on_unfunded fallback)
  -- the developer's own pool.
  payer_account_id  uuid NOT NULL REFERENCES accounts (id),
  customer_id       text,
  origin            text NOT NULL CHECK (origin IN ('observe', 'ambient')),
  scope             text NOT NULL,
  trust             text NOT NULL CHECK (trust IN ('high', 'low')),
  -- Provenance given to what the pass writes (forget by source).
  source            text NOT NULL,
  -- The transcript, and later the memories extracted from it: JSON, sealed under the brain's key
  -- when the brain is sealed, so the workflow's history never holds memory text.
  transcript        bytea NOT NULL,
  extracted         bytea,
  status            text NOT NULL DEFAULT 'learning' CHECK (status IN ('learning', 'completed', 'skipped', 'failed')),
  -- The native memories recalled into the turn, best first, with their tier and composite score
  -- at the time, and those the answer used: autotune learns tier weights from them.
  recalled          text[] NOT NULL DEFAULT '{}',
  recalled_tiers    text[] NOT NULL DEFAULT '{}',
  recalled_scores   real[] NOT NULL DEFAULT '{}',
  used              text[] NOT NULL DEFAULT '{}',
  cost_micros       bigint NOT NULL DEFAULT 0,
  result            jsonb,
  created_at        timestamptz NOT NULL DEFAULT now(),
  completed_at      timestamptz
);
CREATE INDEX brain_learn_passes_recent_idx ON brain_learn_passes (brain_id, completed_at DESC) WHERE status = 'completed';

-- Entities extracted by learning, normalised (case, whitespace, articles, simple aliases) and
-- unique per brain and scope. `aliases` holds other normalised names that resolve to the entity.
CREATE TABLE brain_entities (
  id          text PRIMARY KEY CHECK (id ~ '^bent_[0-9A-Za-z]{24}$'),
  brain_id    text NOT NULL REFERENCES brains (id) ON DELETE CASCADE,
  scope       text NOT NULL,
  name        text NOT NULL,
  normalized  text NOT NULL,
  aliases     text[] NOT NULL DEFAULT '{}',
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  UNIQUE (brain_id, scope, normalized)
);
CREATE INDEX brain_entities_names_idx ON brain_entities USING gin (aliases);
CREATE INDEX brain_entities_scope_idx ON brain_entities (brain_id, scope text_pattern_ops, normalized);

-- Which entries mention an entity (by entry id: a refinement keeps its links).
CREATE TABLE brain_entity_links (
  brain_id   text NOT NULL REFERENCES brains (id) ON DELETE CASCADE,
  entity_id  text NOT NULL REFERENCES brain_entities (id) ON DELETE CASCADE,
  entry_id   text NOT NULL,
  PRIMARY KEY (entity_id, entry_id)
);
CREATE INDEX brain_entity_links_entry_idx ON brain_entity_links (brain_id, entry_id);

-- Relations between entities, as learning stated them, with the entry that stated them.
CREATE TABLE brain_edges (
  brain_id     text NOT NULL REFERENCES brains (id) ON DELETE CASCADE,
  from_entity  text NOT NULL REFERENCES brain_entities (id) ON DELETE CASCADE,
  relation     text NOT NULL,
  to_entity    text NOT NULL REFERENCES brain_entities (id) ON DELETE CASCADE,
  entry_id     text,
  created_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (from_entity, relation, to_entity)
);
CREATE INDEX brain_edges_to_idx ON brain_edges (to_entity);

-- A change learning would make but review holds back (learn_mode review, per_tier_review, or
-- low-trust input over high-trust memory). The candidate memory is JSON, sealed under the brain's
-- key when the brain is sealed.
CREATE TABLE brain_proposals (
  id               text PRIMARY KEY CHECK (id ~ '^bprp_[0-9A-Za-z]{24}$'),
  brain_id         text NOT NULL REFERENCES brains (id) ON DELETE CASCADE,
  pass_id          text NOT NULL,
  scope            text NOT NULL,
  action           text NOT NULL CHECK (action IN ('add', 'refine')),
  target_entry_id  text,
  reason           text NOT NULL CHECK (reason IN ('review', 'low_trust')),
  candidate        bytea NOT NULL,
  status           text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'rejected')),
  created_at       timestamptz NOT NULL DEFAULT now(),
  decided_at       timestamptz
);
CREATE INDEX brain_proposals_pending_idx ON brain_proposals (brain_id, created_at, id) WHERE status = 'pending';

-- A turn that contradicted a stored memory: the memory stays as it was until someone resolves it.
CREATE TABLE brain_conflicts (
  id           text PRIMARY KEY CHECK (id ~ '^bcfl_[0-9A-Za-z]{24}$'),
  brain_id     text NOT NULL REFERENCES brains (id) ON DELETE CASCADE,
  pass_id      text NOT NULL,
  scope        text NOT NULL,
  entry_id     text NOT NULL,
  candidate    bytea NOT NULL,
  reason       text,
  status       text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'resolved')),
  resolution   text CHECK (resolution IN ('keep_existing', 'accept_incoming')),
  created_at   timestamptz NOT NULL DEFAULT now(),
  resolved_at  timestamptz
);
CREATE INDEX brain_conflicts_open_idx ON brain_conflicts (brain_id, created_at, id) WHERE status = 'open';

-- Autotune: a multiplier per tier over the taxonomy's weights, learned from use; the previous
-- multipliers are kept so the regression guard can put them back when it freezes tuning.
ALTER TABLE brains ADD COLUMN tier_multipliers jsonb NOT NULL DEFAULT '{}';
ALTER TABLE brains ADD COLUMN prior_tier_multipliers jsonb;
-- Grows when a learn pass counts uses (use_count, last_used change in place, no new version):
-- caches of a brain's rows refresh on it, while a reindex, which only minds content, ignores it.
ALTER TABLE brains ADD COLUMN usage_seq bigint NOT NULL DEFAULT 0;

-- Down Migration
ALTER TABLE brains DROP COLUMN usage_seq;
ALTER TABLE brains DROP COLUMN prior_tier_multipliers;
ALTER TABLE brains DROP COLUMN tier_multipliers;
DROP TABLE brain_conflicts;
DROP TABLE brain_proposals;
DROP TABLE brain_edges;
DROP TABLE brain_entity_links;
DROP TABLE brain_entities;
DROP TABLE brain_learn_passes;
