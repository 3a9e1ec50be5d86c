-- Up Migration

-- Recall with mounts reads the entities linked to a few pack entries (a pack row's twin is a
-- native entry sharing an entity with it). The key leads with the entity, so that read scanned
-- every link of the version; this index finds an entry's links directly, as brain_entity_links'
-- own entry index does for native entries.
CREATE INDEX brain_pack_entity_links_entry_idx ON brain_pack_entity_links (version_id, entry_id);

-- Down Migration
DROP INDEX brain_pack_entity_links_entry_idx;
