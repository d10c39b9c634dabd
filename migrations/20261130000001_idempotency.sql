-- The idempotency schema (SPEC §4, §5). One row per (user, key) in `idempotency_keys`, pointing
-- at the business record it created (`payments` or `refunds`). The saved answer is not copied
-- into the key row: a finished payment's 201 body and its `Location`, or a decline's 402 body,
-- are rendered from the immutable payment/refund row, so a replay is byte-for-byte the first
-- answer while a key row stays about a quarter of the article's (see README, "Storage").

CREATE TYPE key_state AS ENUM ('started', 'unknown', 'done');
CREATE TYPE idempotent_operation AS ENUM ('pay_bill', 'refund_payment');
CREATE TYPE movement_status AS ENUM ('pending', 'succeeded', 'declined');

-- Every table's primary key leads with user_id and every statement names the user, so the
-- three tables can be distributed (or hash-partitioned) by user_id and stay co-located.
CREATE TABLE payments (
    user_id        bigint          NOT NULL,
    payment_id     uuid            NOT NULL,
    bill_id        text            NOT NULL,
    amount_paise   bigint          NOT NULL CHECK (amount_paise > 0),
    payer_vpa      text            NOT NULL,
    -- `pending` from the claim until the bank's outcome is known; then `succeeded` or `declined`.
    status         movement_status NOT NULL,
    -- `pay-{user_id}-{key}`: the bank dedupes on it, and reconciliation looks the outcome up by it.
    -- Not unique: a key reused after it expired is a new request under the same reference.
    bank_reference text            NOT NULL,
    decline_reason text,
    created_at     timestamptz     NOT NULL DEFAULT now(),
    finished_at    timestamptz,
    PRIMARY KEY (user_id, payment_id)
);

CREATE TABLE refunds (
    user_id        bigint          NOT NULL,
    refund_id      uuid            NOT NULL,
    payment_id     uuid            NOT NULL,
    amount_paise   bigint          NOT NULL CHECK (amount_paise > 0),
    status         movement_status NOT NULL,
    bank_reference text            NOT NULL,
    decline_reason text,
    created_at     timestamptz     NOT NULL DEFAULT now(),
    finished_at    timestamptz,
    PRIMARY KEY (user_id, refund_id),
    FOREIGN KEY (user_id, payment_id) REFERENCES payments (user_id, payment_id)
);
CREATE INDEX refunds_by_payment ON refunds (user_id, payment_id);

CREATE TABLE idempotency_keys (
    user_id     bigint               NOT NULL,
    -- A v4 UUID key as itself (16 bytes, not 37 of text); under `key_format: any` the key text is
    -- mapped to a UUID by SHA-256 (see shared::key::IdempotencyKey::storage_uuid).
    key         uuid                 NOT NULL,
    operation   idempotent_operation NOT NULL,
    state       key_state            NOT NULL,
    -- SHA-256 of the operation and canonical body: 32 bytes, not 64 hex characters.
    fingerprint bytea                NOT NULL CHECK (octet_length(fingerprint) = 32),
    -- The payment or refund this key created; the saved answer is rendered from it.
    resource_id uuid                 NOT NULL,
    -- Expiry counts from the first claim; stuck detection from the latest claim.
    created_at  timestamptz          NOT NULL DEFAULT now(),
    claimed_at  timestamptz          NOT NULL DEFAULT now(),
    -- Reconciliation of an unfinished key: when to ask the bank next, and how many look-ups
    -- failed so far (for backoff). NULL/0 for keys that never needed it.
    next_lookup_at timestamptz,
    failed_lookups smallint          NOT NULL DEFAULT 0,
    -- The key is scoped to the user: the primary key is the unique rule, and a key is only ever
    -- looked up together with its user. `user_id` first, so the table can be distributed by it.
    PRIMARY KEY (user_id, key)
);
-- Reconciliation scans unfinished keys by age; a partial index keeps finished keys out of it.
CREATE INDEX idempotency_keys_unfinished ON idempotency_keys (claimed_at) WHERE state <> 'done';
-- The janitor deletes expired keys oldest first in small batches.
CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);
