-- Up Migration
-- Embeddings, recall and vector stores all keep vectors in PostgreSQL with pgvector.
CREATE EXTENSION IF NOT EXISTS vector;

-- Down Migration
DROP EXTENSION IF EXISTS vector;
