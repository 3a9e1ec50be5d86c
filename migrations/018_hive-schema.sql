-- Up Migration

-- The memory hive (spec 3) is a server of its own in this repository, and its tables live in a
-- schema of their own in the platform's database: no name of the hive's collides with the
-- gateway's, and the hive's data is one schema to dump, grant or drop.
CREATE SCHEMA hive;

-- One row: the version of the hive's schema, which the hive's GET /v1/health reports. A later
-- migration that changes the hive's tables sets a new version in the same migration.
CREATE TABLE hive.schema_info (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  version text NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO hive.schema_info (version) VALUES ('1');

-- Down Migration
DROP SCHEMA hive CASCADE;
