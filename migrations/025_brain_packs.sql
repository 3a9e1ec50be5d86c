-- Up Migration

-- Packs (spec 2): immutable, versioned snapshots published from a brain, mounted into other
-- brains as a read-only base layer. One pack per source brain; its embedding model is frozen at
-- the first publish. A sealed pack (standard, strict) holds its content under its own data key.
CREATE TABLE brain_packs (
  id                     text PRIMARY KEY CHECK (id ~ '^pack_[0-9A-Za-z]{24}$'),
  developer_id           uuid NOT NULL REFERENCES accounts (id),
  -- No foreign key: published versions outlive the brain they came from.
  source_brain_id        text NOT NULL UNIQUE,
  name                   text NOT NULL,
  slug                   text NOT NULL CHECK (slug ~ '^[a-z0-9][a-z0-9-]{0,63}$'),
  visibility             text NOT NULL CHECK (visibility IN ('private', 'org', 'unlisted', 'public')),
  encryption_at_publish  text NOT NULL CHECK (encryption_at_publish IN ('none', 'standard', 'strict')),
  wrapped_data_key       bytea,
  CHECK ((encryption_at_publish = 'none') = (wrapped_data_key IS NULL)),
  embedding_model        text NOT NULL,
  embedding_dims         integer NOT NULL,
  -- The newest ready version (0 until one is).
  latest_version         integer NOT NULL DEFAULT 0,
  retired_at             timestamptz,
  created_at             timestamptz NOT NULL DEFAULT now(),
  updated_at             timestamptz NOT NULL DEFAULT now(),
  UNIQUE (developer_id, slug)
);
CREATE INDEX brain_packs_owner_idx ON brain_packs (developer_id, created_at DESC, id);

-- A version: allocated serially, built from the brain as it stood at snapshot_at (entries are
-- versioned, so an asynchronous build copies exactly what the gates scanned), then never changed.
CREATE TABLE brain_pack_versions (
  id                  text PRIMARY KEY CHECK (id ~ '^pkv_[0-9A-Za-z]{24}$'),
  pack_id             text NOT NULL REFERENCES brain_packs (id) ON DELETE CASCADE,
  version             integer NOT NULL CHECK (version > 0),
  status              text NOT NULL CHECK (status IN ('building', 'ready', 'failed')),
  source_space        integer NOT NULL,
  snapshot_at         timestamptz NOT NULL,
  entry_count         integer NOT NULL DEFAULT 0,
  chunk_count         integer NOT NULL DEFAULT 0,
  byte_size           bigint NOT NULL DEFAULT 0,
  notes               text,
  published_by        uuid NOT NULL REFERENCES accounts (id),
  published_at        timestamptz NOT NULL DEFAULT now(),
  -- The source brain's policy and autotune multipliers at publish: mounted rows rank by these.
  memory_policy       jsonb NOT NULL,
  tier_multipliers    jsonb NOT NULL,
  failure_reason      text,
  -- Set when a version no reference mount pins any longer had its content dropped.
  content_dropped_at  timestamptz,
  UNIQUE (pack_id, version)
);

CREATE TABLE brain_pack_entries (
  version_id   text NOT NULL REFERENCES brain_pack_versions (id) ON DELETE CASCADE,
  entry_id     text NOT NULL,
  scope        text NOT NULL,
  class        text NOT NULL,
  type         text,
  title        text,
  body         text,
  title_sealed bytea,
  body_sealed  bytea,
  CHECK ((body IS NULL) <> (body_sealed IS NULL)),
  body_bytes   bigint NOT NULL,
  trust        text NOT NULL,
  source       text,
  created_at   timestamptz NOT NULL,
  updated_at   timestamptz NOT NULL,
  chunks       integer NOT NULL,
  PRIMARY KEY (version_id, entry_id)
);

-- Chunks of a version, partitioned by version (a plaintext version's partition gets an HNSW
-- index, which reference mounts search live).
CREATE TABLE brain_pack_chunks (
  version_id        text NOT NULL,
  entry_id          text NOT NULL,
  chunk_index       integer NOT NULL,
  scope             text NOT NULL,
  content           text,
  content_sealed    bytea,
  CHECK ((content IS NULL) <> (content_sealed IS NULL)),
  embedding         vector,
  embedding_sealed  bytea,
  CHECK ((embedding IS NULL) <> (embedding_sealed IS NULL)),
  PRIMARY KEY (version_id, entry_id, chunk_index)
) PARTITION BY LIST (version_id);

-- The version's entity graph, as the source brain had it.
CREATE TABLE brain_pack_entities (
  version_id  text NOT NULL REFERENCES brain_pack_versions (id) ON DELETE CASCADE,
  entity_id   text NOT NULL,
  scope       text NOT NULL,
  name        text NOT NULL,
  normalized  text NOT NULL,
  aliases     text[] NOT NULL DEFAULT '{}',
  PRIMARY KEY (version_id, entity_id)
);
CREATE TABLE brain_pack_entity_links (
  version_id  text NOT NULL REFERENCES brain_pack_versions (id) ON DELETE CASCADE,
  entity_id   text NOT NULL,
  entry_id    text NOT NULL,
  PRIMARY KEY (version_id, entity_id, entry_id)
);
CREATE TABLE brain_pack_edges (
  version_id   text NOT NULL REFERENCES brain_pack_versions (id) ON DELETE CASCADE,
  from_entity  text NOT NULL,
  relation     text NOT NULL,
  to_entity    text NOT NULL,
  entry_id     text,
  PRIMARY KEY (version_id, from_entity, relation, to_entity)
);

-- Cross-account sharing: a grant lets another account mount the pack (materialize only).
CREATE TABLE brain_pack_grants (
  id          text PRIMARY KEY CHECK (id ~ '^pgr_[0-9A-Za-z]{24}$'),
  pack_id     text NOT NULL REFERENCES brain_packs (id) ON DELETE CASCADE,
  account_id  uuid NOT NULL REFERENCES accounts (id),
  created_at  timestamptz NOT NULL DEFAULT now(),
  UNIQUE (pack_id, account_id)
);
CREATE INDEX brain_pack_grants_account_idx ON brain_pack_grants (account_id);

CREATE TABLE brain_mounts (
  id                    text PRIMARY KEY CHECK (id ~ '^mnt_[0-9A-Za-z]{24}$'),
  brain_id              text NOT NULL REFERENCES brains (id) ON DELETE CASCADE,
  pack_id               text NOT NULL REFERENCES brain_packs (id),
  mode                  text NOT NULL CHECK (mode IN ('reference', 'materialize')),
  pinned_version        integer NOT NULL,
  follow_latest         boolean NOT NULL DEFAULT false,
  scope_map             jsonb NOT NULL,
  status                text NOT NULL CHECK (status IN ('pending', 'ready')),
  materialized_version  integer,
  created_at            timestamptz NOT NULL DEFAULT now(),
  updated_at            timestamptz NOT NULL DEFAULT now(),
  UNIQUE (brain_id, pack_id)
);
CREATE INDEX brain_mounts_pack_idx ON brain_mounts (pack_id, pinned_version);

-- Down Migration
DROP TABLE brain_mounts;
DROP TABLE brain_pack_grants;
DROP TABLE brain_pack_edges;
DROP TABLE brain_pack_entity_links;
DROP TABLE brain_pack_entities;
DROP TABLE brain_pack_chunks;
DROP TABLE brain_pack_entries;
DROP TABLE brain_pack_versions;
DROP TABLE brain_packs;
