-- The PostgreSQL migration of the same name: each key's status checks (count, last, and when a
-- movement whose checks ran out is due in the settlement file) and the deployment's one pace.
ALTER TABLE idempotency_keys ADD COLUMN status_checks INTEGER NOT NULL DEFAULT 0 CHECK (status_checks >= 0);
ALTER TABLE idempotency_keys ADD COLUMN last_status_check_at INTEGER;
ALTER TABLE idempotency_keys ADD COLUMN settlement_due_at INTEGER;

CREATE TABLE status_check_pace (
    id           INTEGER PRIMARY KEY CHECK (id = 1),
    next_slot_at INTEGER NOT NULL
);
INSERT INTO status_check_pace (id, next_slot_at) VALUES (1, 0);

CREATE INDEX payments_by_bank_reference ON payments (bank_reference);
CREATE INDEX refunds_by_bank_reference ON refunds (bank_reference);
