-- Up Migration

-- The memory hive's machines (spec 3, issue 29): the hive's own certificate authority, enrolled
-- machines with their certificates, the requests of permanent enrolment, and the push that tells
-- the mutual-TLS relay at once when a machine is revoked.

-- The hive's certificate authority: one row, made on the hive's first start. The private key is
-- kept only sealed (AES-256-GCM) under the master key (VECTOR_STORE_MASTER_KEY), never in clear.
CREATE TABLE hive.certificate_authority (
  id              boolean PRIMARY KEY DEFAULT true CHECK (id),
  certificate     text NOT NULL,
  sealed_key      bytea NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now()
);

-- A machine of an organisation, acting for the person who enrolled it (its token is that person's,
-- so the person's roles apply at each use). Temporary machines (enrolled by password) expire with
-- `expires_at`; permanent ones do not, their certificates are renewed. A machine row is never
-- deleted: a revoked machine keeps its name, so the name is retired for good in its organisation.
CREATE TABLE hive.machines (
  id           text PRIMARY KEY CHECK (id ~ '^mch_[0-9A-Za-z]{24}$'),
  org_id       text NOT NULL REFERENCES hive.organisations (id) ON DELETE CASCADE,
  person_id    text NOT NULL REFERENCES hive.people (id) ON DELETE CASCADE,
  name         text NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
  kind         text NOT NULL CHECK (kind IN ('temporary', 'permanent')),
  token_id     text NOT NULL UNIQUE REFERENCES hive.tokens (id) ON DELETE CASCADE,
  expires_at   timestamptz,
  created_at   timestamptz NOT NULL DEFAULT now(),
  last_seen_at timestamptz,
  revoked_at   timestamptz,
  revoked_by   text,
  CHECK ((kind = 'temporary') = (expires_at IS NOT NULL)),
  UNIQUE (org_id, name)
);
CREATE INDEX machines_person_idx ON hive.machines (person_id);

-- Every certificate the hive issued to a machine, by serial (hex): the relay finds the machine of a
-- client certificate here. A renewal adds a row; the certificate it renews stays valid until its
-- own not_after (a client whose renewal answer was lost can renew again with it).
CREATE TABLE hive.machine_certificates (
  serial      text PRIMARY KEY CHECK (serial ~ '^[0-9a-f]{32}$'),
  machine_id  text NOT NULL REFERENCES hive.machines (id) ON DELETE CASCADE,
  certificate text NOT NULL,
  not_after   timestamptz NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX machine_certificates_machine_idx ON hive.machine_certificates (machine_id, not_after DESC);

-- Permanent enrolment: a request (grants nothing) names an address and carries a certificate
-- request; an admin of that person's organisation approves it; the claim (with the secret the
-- request answered, stored hashed) then makes the machine. A request for an unknown address is
-- kept like any other (so the answer does not tell which addresses have accounts) but, with no
-- person, no organisation ever lists or approves it.
CREATE TABLE hive.enrolment_requests (
  id                text PRIMARY KEY CHECK (id ~ '^enr_[0-9A-Za-z]{24}$'),
  email             text NOT NULL,
  person_id         text REFERENCES hive.people (id) ON DELETE CASCADE,
  csr               text NOT NULL,
  name              text CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
  claim_secret_hash bytea NOT NULL,
  status            text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'claimed')),
  approved_by       text,
  approved_at       timestamptz,
  machine_id        text REFERENCES hive.machines (id) ON DELETE SET NULL,
  created_at        timestamptz NOT NULL DEFAULT now(),
  expires_at        timestamptz NOT NULL
);
CREATE INDEX enrolment_requests_pending_idx ON hive.enrolment_requests (person_id, created_at) WHERE status = 'pending';

-- Revoking a machine's token (POST /v1/token/revoke, or any other path) revokes the machine, and
-- revoking a machine revokes its token: a machine and its credential live and die together.
CREATE FUNCTION hive_machine_token_revoked() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE hive.machines SET revoked_at = NEW.revoked_at, revoked_by = coalesce(revoked_by, 'token ' || NEW.id)
   WHERE token_id = NEW.id AND revoked_at IS NULL;
  RETURN NULL;
END $$;
CREATE TRIGGER tokens_revoke_machine AFTER UPDATE OF revoked_at ON hive.tokens
  FOR EACH ROW WHEN (OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL) EXECUTE FUNCTION hive_machine_token_revoked();

-- The push to the relay: every revocation, whatever path made it, is announced at commit on
-- channel hive_machine_revoked with the machine id, so each relay drops what it cached at once.
CREATE FUNCTION hive_machine_revoked_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE hive.tokens SET revoked_at = NEW.revoked_at WHERE id = NEW.token_id AND revoked_at IS NULL;
  PERFORM pg_notify('hive_machine_revoked', NEW.id);
  RETURN NULL;
END $$;
CREATE TRIGGER machines_revoked_notify AFTER UPDATE OF revoked_at ON hive.machines
  FOR EACH ROW WHEN (OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL) EXECUTE FUNCTION hive_machine_revoked_notify();

UPDATE hive.schema_info SET version = '4', updated_at = now();

-- Down Migration
DROP TRIGGER machines_revoked_notify ON hive.machines;
DROP FUNCTION hive_machine_revoked_notify();
DROP TRIGGER tokens_revoke_machine ON hive.tokens;
DROP FUNCTION hive_machine_token_revoked();
DROP TABLE hive.enrolment_requests;
DROP TABLE hive.machine_certificates;
DROP TABLE hive.machines;
DROP TABLE hive.certificate_authority;
UPDATE hive.schema_info SET version = '3', updated_at = now();
