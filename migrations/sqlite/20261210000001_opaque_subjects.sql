-- The PostgreSQL migration of the same name, for the embedded store: `user_id` becomes TEXT
-- (the subject as the identity provider writes it; a numeric id its decimal string). SQLite
-- changes a column's type only by rebuilding its table: each is renamed aside, made again under
-- its name and filled from the old (keys keep their rowids, events their ids), and the view,
-- triggers and indexes that name them are dropped first and made again. TEXT, not INTEGER: with
-- INTEGER affinity "042" would be stored as 42, the same user as "42".
DROP VIEW key_trail;
DROP TRIGGER key_events_expired;
DROP TRIGGER idempotency_keys_expire_after_their_claim;
ALTER TABLE refunds RENAME TO refunds_old;
ALTER TABLE payments RENAME TO payments_old;
ALTER TABLE idempotency_keys RENAME TO idempotency_keys_old;
ALTER TABLE key_events RENAME TO key_events_old;

CREATE TABLE payments (
    user_id        TEXT    NOT NULL CHECK (length(CAST(user_id AS BLOB)) BETWEEN 1 AND 255),
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
INSERT INTO payments (user_id, payment_id, bill_id, amount_paise, payer_vpa, status, bank_reference,
    decline_reason, created_at, finished_at)
  SELECT CAST(user_id AS TEXT), payment_id, bill_id, amount_paise, payer_vpa, status,
    bank_reference, decline_reason, created_at, finished_at
  FROM payments_old;

CREATE TABLE refunds (
    user_id         TEXT    NOT NULL CHECK (length(CAST(user_id AS BLOB)) BETWEEN 1 AND 255),
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
INSERT INTO refunds (user_id, refund_id, payment_id, amount_paise, status, bank_reference, debit_reference,
    decline_reason, created_at, finished_at)
  SELECT CAST(user_id AS TEXT), refund_id, payment_id, amount_paise, status, bank_reference,
    debit_reference, decline_reason, created_at, finished_at
  FROM refunds_old;

CREATE TABLE idempotency_keys (
    user_id         TEXT    NOT NULL CHECK (length(CAST(user_id AS BLOB)) BETWEEN 1 AND 255),
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
    lease_owner BLOB CHECK (lease_owner IS NULL OR length(lease_owner) = 16),
    expires_at INTEGER NOT NULL DEFAULT 0,
    claim_token BLOB CHECK (claim_token IS NULL OR length(claim_token) = 16),
    status_checks INTEGER NOT NULL DEFAULT 0 CHECK (status_checks >= 0),
    last_status_check_at INTEGER,
    settlement_due_at INTEGER,
    PRIMARY KEY (user_id, key)
);
INSERT INTO idempotency_keys (rowid, user_id, key, operation, state, fingerprint, resource_id, created_at, claimed_at,
    next_lookup_at, failed_lookups, lease_until, bank_call_ended, lease_owner, expires_at,
    claim_token, status_checks, last_status_check_at, settlement_due_at)
  SELECT rowid, CAST(user_id AS TEXT), key, operation, state, fingerprint, resource_id, created_at,
    claimed_at, next_lookup_at, failed_lookups, lease_until, bank_call_ended, lease_owner,
    expires_at, claim_token, status_checks, last_status_check_at, settlement_due_at
  FROM idempotency_keys_old;

CREATE TABLE key_events (
    event_id        INTEGER PRIMARY KEY,
    user_id         TEXT    NOT NULL CHECK (length(CAST(user_id AS BLOB)) BETWEEN 1 AND 255),
    at              INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    repeats         INTEGER NOT NULL DEFAULT 1,
    event           TEXT    NOT NULL CHECK (event IN (
        'claimed', 'claimed_again', 'replayed', 'mismatch_refused', 'in_progress_refused',
        'waited', 'bank_answered', 'bank_answer_unknown', 'looked_up', 'released',
        'late_debit_found', 'resolved', 'voided', 'expired', 'operator_lookup', 'ledger_checked',
        'customer_viewed')),
    key             BLOB    CHECK (key IS NULL OR length(key) = 16),
    resource_id     BLOB    CHECK (resource_id IS NULL OR length(resource_id) = 16),
    request_id      BLOB    CHECK (request_id IS NULL OR length(request_id) = 16),
    trace_id        BLOB    CHECK (trace_id IS NULL OR length(trace_id) = 16),
    request_id_text TEXT,
    detail          TEXT,
    operator        TEXT,
    reason          TEXT,
    CHECK (request_id IS NULL OR request_id_text IS NULL)
);
INSERT INTO key_events (event_id, user_id, at, repeats, event, key, resource_id, request_id, trace_id,
    request_id_text, detail, operator, reason)
  SELECT event_id, CAST(user_id AS TEXT), at, repeats, event, key, resource_id, request_id,
    trace_id, request_id_text, detail, operator, reason
  FROM key_events_old;

DROP TABLE refunds_old;
DROP TABLE payments_old;
DROP TABLE idempotency_keys_old;
DROP TABLE key_events_old;

CREATE INDEX refunds_by_payment ON refunds (user_id, payment_id);
CREATE INDEX idempotency_keys_unfinished ON idempotency_keys (claimed_at) WHERE state <> 'done';
CREATE INDEX idempotency_keys_by_expiry ON idempotency_keys (expires_at);
CREATE INDEX key_events_by_user ON key_events (user_id);
CREATE INDEX key_events_by_age ON key_events (at);
CREATE INDEX key_events_late_debits ON key_events (at) WHERE event = 'late_debit_found';
CREATE INDEX payments_by_bank_reference ON payments (bank_reference);
CREATE INDEX refunds_by_bank_reference ON refunds (bank_reference);
CREATE TRIGGER idempotency_keys_expire_after_their_claim
    BEFORE INSERT ON idempotency_keys WHEN NEW.expires_at <= NEW.created_at
BEGIN
    SELECT RAISE(ABORT, 'a key must expire after its claim');
END;
CREATE TRIGGER key_events_expired AFTER DELETE ON idempotency_keys
BEGIN
    INSERT INTO key_events (user_id, key, resource_id, event, detail)
    VALUES (OLD.user_id, OLD.key, OLD.resource_id, 'expired', 'the key was deleted in state ' || OLD.state);
END;
CREATE VIEW key_trail AS
SELECT user_id, event_id, key, resource_id, at, event, detail, request_id, request_id_text,
       trace_id, operator, reason, repeats
FROM key_events;
