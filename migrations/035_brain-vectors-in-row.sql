-- Up Migration

-- pgvector stores a vector out of line (EXTERNAL), so every candidate a brain's search returns had
-- its 6 KB vector read back from TOAST to compute its cosine: 4 ms of a 256-row draw at 10,000
-- chunks. MAIN keeps a vector in its row while the row fits a page (1,536 dimensions do; 3,072 do
-- not, and move out as before). Rows already written keep their place until rewritten.
ALTER TABLE brain_chunks ALTER COLUMN embedding SET STORAGE MAIN;
ALTER TABLE brain_pack_chunks ALTER COLUMN embedding SET STORAGE MAIN;

-- Down Migration
ALTER TABLE brain_pack_chunks ALTER COLUMN embedding SET STORAGE EXTERNAL;
ALTER TABLE brain_chunks ALTER COLUMN embedding SET STORAGE EXTERNAL;
