-- Up Migration

-- MAIN (035) keeps a vector in its row, but PostgreSQL still compresses a MAIN value whenever its
-- row passes toast_tuple_target (2 KB by default), and vectors that compress (sparse ones, as the
-- emulator's are: 6 KB became about 1 KB with pglz) were then decompressed for every candidate a
-- search returned: 8.2 us a vector against 0.5 us stored whole. At 100,000 chunks the first
-- 256-row draw took p50 7.4-7.6 ms against 11.1-11.5, the next 256 3.6-3.7 against 7.4-7.8.
-- A target of a whole page leaves a row that fits a page as written; dense vectors, which do not
-- compress, were already stored that way (a row a page: 781 MB at 100,000 chunks, not 112). A
-- larger row is still compressed and moved as before.
-- Partitions carry the option themselves (a partitioned table holds no storage options); rows
-- already written keep their form until rewritten.
DO $$
DECLARE partition regclass;
BEGIN
  FOR partition IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent IN ('brain_chunks'::regclass, 'brain_pack_chunks'::regclass) LOOP
    EXECUTE format('ALTER TABLE %s SET (toast_tuple_target = 8160)', partition);
  END LOOP;
END $$;

-- Down Migration
DO $$
DECLARE partition regclass;
BEGIN
  FOR partition IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent IN ('brain_chunks'::regclass, 'brain_pack_chunks'::regclass) LOOP
    EXECUTE format('ALTER TABLE %s RESET (toast_tuple_target)', partition);
  END LOOP;
END $$;
