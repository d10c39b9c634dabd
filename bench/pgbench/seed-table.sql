-- The seed article's key table (shared/reference/idempotency-keys-article.txt), for
-- seed-two-statements.sql: set-up, hand-written.
CREATE TABLE idem_keys (
    user_id    bigint      NOT NULL,
    key        text        NOT NULL,
    fp         text        NOT NULL,
    status     text        NOT NULL,
    code       int,
    response   jsonb,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, key)
);
