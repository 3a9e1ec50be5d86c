-- Up Migration

-- Brains and plaintext pack versions build their HNSW graphs as vector stores do since 033: m 16,
-- ef_construction 128, over halfvec. A row links into half as many neighbours, each read at half
-- the bytes, so a materialize mount's import (which writes every row under the consumer's graph)
-- runs about three times as fast, at recall@10 0.98 or better (bench/README.md, brains and packs).
-- Brains and versions built before this keep the single-precision graph they were built with:
-- their indexes and their searches name its cast, so nothing is rebuilt on upgrade.
ALTER TABLE brains ADD COLUMN hnsw_precision text NOT NULL DEFAULT 'single' CHECK (hnsw_precision IN ('single', 'half'));
ALTER TABLE brains ALTER COLUMN hnsw_precision SET DEFAULT 'half';
ALTER TABLE brain_pack_versions ADD COLUMN hnsw_precision text NOT NULL DEFAULT 'single' CHECK (hnsw_precision IN ('single', 'half'));
ALTER TABLE brain_pack_versions ALTER COLUMN hnsw_precision SET DEFAULT 'half';

-- pgvector stores a vector out of line (EXTERNAL), so every candidate a search returns had its
-- 6 KB vector read back from TOAST to compute its cosine: 4 ms of a 256-row draw at 10,000 chunks.
-- MAIN keeps a vector in its row while the row fits a page (1,536 dimensions do) and moves it out
-- only when it must (3,072 do not). Rows already written keep their place until rewritten.
ALTER TABLE brain_chunks ALTER COLUMN embedding SET STORAGE MAIN;
ALTER TABLE brain_pack_chunks ALTER COLUMN embedding SET STORAGE MAIN;

-- Down Migration
ALTER TABLE brain_pack_chunks ALTER COLUMN embedding SET STORAGE EXTERNAL;
ALTER TABLE brain_chunks ALTER COLUMN embedding SET STORAGE EXTERNAL;
ALTER TABLE brain_pack_versions DROP COLUMN hnsw_precision;
ALTER TABLE brains DROP COLUMN hnsw_precision;
