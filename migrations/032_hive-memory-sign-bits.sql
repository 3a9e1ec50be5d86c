-- Up Migration

-- Recall's meaning side reads a signature of each reachable memory instead of its whole vector:
-- which components of the embedding are positive, then which are negative (pgvector's
-- binary_quantize of the vector and of its negation; `(e - e) - e` is -e, pgvector has no unary
-- minus). Two bits a dimension, 384 bytes for 1,536, where the vector itself (6 KB) lives out of
-- line in TOAST. Recall ranks the reachable memories by the Jaccard distance of these signatures,
-- then scores only the nearest few hundred by their exact cosine (shared/hive/memory-repository.ts).
-- Both signs count because a sparse embedding (few non-zero components) would otherwise be
-- compared by half its components; for a dense one the distance orders as the Hamming distance
-- of its sign bits does.
-- Generated, so every path that writes an embedding (the worker, the sweep, a restore) keeps it.
ALTER TABLE hive.memories
  ADD COLUMN embedding_signs bit varying GENERATED ALWAYS AS (binary_quantize(embedding)::bit varying || binary_quantize((embedding - embedding) - embedding)::bit varying) STORED;

-- Scoping stays inside the query: the reachable nodes' memories are read from this index alone
-- (an index-only scan: the signature and every column the recall filters on are in it), so the
-- cost of the shortlist grows with the reach at a few hundred bytes a memory.
CREATE INDEX memories_signs_idx ON hive.memories (node_id) INCLUDE (id, embedding_model, scope, kind, embedding_signs)
  WHERE forgotten_at IS NULL AND embedding_signs IS NOT NULL;

UPDATE hive.schema_info SET version = '8', updated_at = now();

-- Down Migration
DROP INDEX hive.memories_signs_idx;
ALTER TABLE hive.memories DROP COLUMN embedding_signs;
UPDATE hive.schema_info SET version = '7', updated_at = now();
