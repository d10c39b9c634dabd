-- The idempotency schema for the embedded SQLite store: the same tables, keys and rules as the
-- PostgreSQL schema (../20261130000001_idempotency.sql, which explains each column), in SQLite's
-- compact types:
-- - UUIDs are BLOB(16) and the fingerprint BLOB(32), checked by length;
-- - timestamps are INTEGER unix microseconds (UTC), written from SQLite's own clock;
-- - states are TEXT with a CHECK instead of PostgreSQL enum types.
-- One addition: `lease_until` on keys, because SQLite has no `FOR UPDATE SKIP LOCKED` (see
-- backend/src/store/sqlite/mod.rs).

CREATE TABLE payments (
    user_id        INTEGER NOT NULL,
    payment_id     BLOB    NOT NULL CHECK (length(payment_id) = 16),
    bill_id        TEXT    NOT NULL,
    amount_paise   INTEGER NOT NULL CHECK (amount_paise > 0),
    payer_vpa      TEXT    NOT NULL,
    status         TEXT    NOT NULL CHECK (status IN ('pending', 'succeeded', 'declined')),
    bank_reference TEXT    NOT NULL,
    decline_reason TEXT,
    created_at     INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    finished_at    INTEGER,
    PRIMARY KEY (user_id, payment_id)
);

CREATE TABLE refunds (
    user_id        INTEGER NOT NULL,
    refund_id      BLOB    NOT NULL CHECK (length(refund_id) = 16),
    payment_id     BLOB    NOT NULL CHECK (length(payment_id) = 16),
    amount_paise   INTEGER NOT NULL CHECK (amount_paise > 0),
    status         TEXT    NOT NULL CHECK (status IN ('pending', 'succeeded', 'declined')),
    bank_reference TEXT    NOT NULL,
    decline_reason TEXT,
    created_at     INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    finished_at    INTEGER,
    PRIMARY KEY (user_id, refund_id),
    FOREIGN KEY (user_id, payment_id) REFERENCES payments (user_id, payment_id)
);
CREATE INDEX refunds_by_payment ON refunds (user_id, payment_id);

-- A rowid table (not WITHOUT ROWID): the janitor deletes expired keys in batches by rowid.
CREATE TABLE idempotency_keys (
    user_id        INTEGER NOT NULL,
    key            BLOB    NOT NULL CHECK (length(key) = 16),
    operation      TEXT    NOT NULL CHECK (operation IN ('pay_bill', 'refund_payment')),
    state          TEXT    NOT NULL CHECK (state IN ('started', 'unknown', 'done')),
    fingerprint    BLOB    NOT NULL CHECK (length(fingerprint) = 32),
    resource_id    BLOB    NOT NULL CHECK (length(resource_id) = 16),
    created_at     INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    claimed_at     INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    next_lookup_at INTEGER,
    failed_lookups INTEGER NOT NULL DEFAULT 0,
    -- Reconciliation's lease: until this instant one reconciler owns the key (NULL: nobody).
    -- Taken and checked by single statements instead of a row lock held across the bank call.
    lease_until    INTEGER,
    PRIMARY KEY (user_id, key)
);
CREATE INDEX idempotency_keys_unfinished ON idempotency_keys (claimed_at) WHERE state <> 'done';
CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);
