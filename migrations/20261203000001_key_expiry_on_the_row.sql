-- A key's expiry, decided once at its claim and written on its row (docs/design.md, "Expiry"):
-- the database's clock at the first claim plus the policy's keep_keys_for_hours in force then.
-- Every decision about expiry reads this column (the decision table, the janitor, a released
-- key's last check, the replay cache, the key status and the Idempotency-Expires header), so
-- replicas whose policies differ agree on every existing key, and a policy change applies to
-- new claims only. A re-claim after a release keeps it; a key reused after expiry is a new row.
--
-- Rows claimed before this migration get the shipped policy's 48 hours from their creation. A
-- deployment that kept keys for another span updates them once after migrating:
--   UPDATE idempotency_keys SET expires_at = created_at + interval 'N hours';
-- The default is only for replicas of the previous release during a rolling deploy (they do not
-- write the column); this release always writes it from its policy.
ALTER TABLE idempotency_keys ADD COLUMN expires_at timestamptz;
UPDATE idempotency_keys SET expires_at = created_at + interval '48 hours';
ALTER TABLE idempotency_keys ALTER COLUMN expires_at SET NOT NULL,
    ALTER COLUMN expires_at SET DEFAULT now() + interval '48 hours',
    ADD CONSTRAINT idempotency_keys_expire_after_their_claim CHECK (expires_at > created_at);
-- The janitor deletes expired keys soonest-expired first, in small batches.
DROP INDEX idempotency_keys_by_age;
CREATE INDEX idempotency_keys_by_expiry ON idempotency_keys (expires_at);
