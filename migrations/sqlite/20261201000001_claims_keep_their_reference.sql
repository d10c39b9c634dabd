-- The PostgreSQL migration of the same name, for the embedded store: the key state `released`,
-- the movement status `void`, `bank_call_ended` on keys and `debit_reference` on refunds (see
-- ../20261201000001_claims_keep_their_reference.sql for what each means).
--
-- SQLite cannot change a CHECK constraint in place, so the three tables are rebuilt: each old
-- table is renamed aside, the new one created under the old name and filled from it, and the
-- old one dropped. `payments` is renamed first, which makes the old `refunds` refer to the
-- renamed table, so that no foreign key ever points at a dropped table (the migration runs in
-- one transaction with foreign keys on).

ALTER TABLE payments RENAME TO payments_old;
CREATE TABLE payments (
    user_id        INTEGER NOT NULL,
    payment_id     BLOB    NOT NULL CHECK (length(payment_id) = 16),
    bill_id        TEXT    NOT NULL,
    amount_paise   INTEGER NOT NULL CHECK (amount_paise > 0),
    payer_vpa      TEXT    NOT NULL,
    status         TEXT    NOT NULL CHECK (status IN ('pending', 'succeeded', 'declined', 'void')),
    bank_reference TEXT    NOT NULL,
    decline_reason TEXT,
    created_at     INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    finished_at    INTEGER,
    PRIMARY KEY (user_id, payment_id)
);
INSERT INTO payments SELECT user_id, payment_id, bill_id, amount_paise, payer_vpa, status,
    bank_reference, decline_reason, created_at, finished_at FROM payments_old;

CREATE TABLE refunds_new (
    user_id         INTEGER NOT NULL,
    refund_id       BLOB    NOT NULL CHECK (length(refund_id) = 16),
    payment_id      BLOB    NOT NULL CHECK (length(payment_id) = 16),
    amount_paise    INTEGER NOT NULL CHECK (amount_paise > 0),
    status          TEXT    NOT NULL CHECK (status IN ('pending', 'succeeded', 'declined', 'void')),
    bank_reference  TEXT    NOT NULL,
    debit_reference TEXT    NOT NULL,
    decline_reason  TEXT,
    created_at      INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    finished_at     INTEGER,
    PRIMARY KEY (user_id, refund_id),
    FOREIGN KEY (user_id, payment_id) REFERENCES payments (user_id, payment_id)
);
INSERT INTO refunds_new SELECT r.user_id, r.refund_id, r.payment_id, r.amount_paise, r.status,
    r.bank_reference, p.bank_reference, r.decline_reason, r.created_at, r.finished_at
  FROM refunds r JOIN payments p ON p.user_id = r.user_id AND p.payment_id = r.payment_id;
DROP TABLE refunds;
DROP TABLE payments_old;
ALTER TABLE refunds_new RENAME TO refunds;
CREATE INDEX refunds_by_payment ON refunds (user_id, payment_id);

ALTER TABLE idempotency_keys RENAME TO idempotency_keys_old;
CREATE TABLE idempotency_keys (
    user_id         INTEGER NOT NULL,
    key             BLOB    NOT NULL CHECK (length(key) = 16),
    operation       TEXT    NOT NULL CHECK (operation IN ('pay_bill', 'refund_payment')),
    state           TEXT    NOT NULL CHECK (state IN ('started', 'unknown', 'released', 'done')),
    fingerprint     BLOB    NOT NULL CHECK (length(fingerprint) = 32),
    resource_id     BLOB    NOT NULL CHECK (length(resource_id) = 16),
    created_at      INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    claimed_at      INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    next_lookup_at  INTEGER,
    failed_lookups  INTEGER NOT NULL DEFAULT 0,
    lease_until     INTEGER,
    bank_call_ended INTEGER NOT NULL DEFAULT 0 CHECK (bank_call_ended IN (0, 1)),
    PRIMARY KEY (user_id, key)
);
INSERT INTO idempotency_keys (rowid, user_id, key, operation, state, fingerprint, resource_id,
    created_at, claimed_at, next_lookup_at, failed_lookups, lease_until)
  SELECT rowid, user_id, key, operation, state, fingerprint, resource_id, created_at, claimed_at,
    next_lookup_at, failed_lookups, lease_until FROM idempotency_keys_old;
DROP TABLE idempotency_keys_old;
CREATE INDEX idempotency_keys_unfinished ON idempotency_keys (claimed_at) WHERE state <> 'done';
CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);
