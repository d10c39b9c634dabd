-- The PostgreSQL migration of the same name, for the embedded store: a key's expiry written on
-- its row at the claim (unix microseconds, as every time here). One process, so no rolling
-- deploy writes rows without it; the constant default (SQLite adds a NOT NULL column only with
-- one) is overwritten for every existing row at once, and every claim writes the column itself.
ALTER TABLE idempotency_keys ADD COLUMN expires_at INTEGER NOT NULL DEFAULT 0;
UPDATE idempotency_keys SET expires_at = created_at + 48 * 3600 * 1000000;
DROP INDEX idempotency_keys_by_age;
CREATE INDEX idempotency_keys_by_expiry ON idempotency_keys (expires_at);
-- PostgreSQL's CHECK (expires_at > created_at), which SQLite cannot add to an existing table: a
-- claim that did not write its expiry is refused rather than expiring at once.
CREATE TRIGGER idempotency_keys_expire_after_their_claim
    BEFORE INSERT ON idempotency_keys WHEN NEW.expires_at <= NEW.created_at
BEGIN
    SELECT RAISE(ABORT, 'a key must expire after its claim');
END;
