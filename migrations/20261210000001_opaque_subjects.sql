-- Opaque subjects (issue 48): a user is the identity provider's `sub` as it is written
-- (`auth0|64b…`, a Firebase uid, a UUID), not a number, so `user_id` becomes text in every
-- table's key. A numeric id becomes its decimal string ("42"), which is what its tokens' `sub`
-- already says, so every existing row, reply and trail event stays its user's.
--
-- `COLLATE "C"`: a subject is compared byte for byte (it is case-sensitive, and no language's
-- sort order applies to it), which is also the cheapest comparison for the keys' B-trees. The
-- CHECK is the length SPEC §3 allows (1-255, OpenID Connect's bound); the characters are checked
-- where a token is read.
--
-- Not two releases wide: the previous release binds `user_id` as bigint, which text refuses, so
-- every replica must run this release before it is applied (CHANGELOG, upgrade notes). The type
-- change rewrites the four tables under an exclusive lock: on a large database, a maintenance
-- window.
DROP VIEW key_trail;
ALTER TABLE refunds DROP CONSTRAINT refunds_user_id_payment_id_fkey;

-- A table whose `user_id` is already text is left as it is: a deployment partitioned by
-- `user_id` (hash partitions, Citus) cannot change its partition key's type in place, and
-- rebuilds into tables made with the text key before this runs (docs/operations.md).
DO $$
DECLARE
    name text;
BEGIN
    FOREACH name IN ARRAY ARRAY['payments', 'refunds', 'idempotency_keys', 'key_events'] LOOP
        IF (SELECT atttypid FROM pg_attribute
            WHERE attrelid = name::regclass AND attname = 'user_id') = 'bigint'::regtype THEN
            EXECUTE format('ALTER TABLE %I ALTER COLUMN user_id TYPE text COLLATE "C" '
                           'USING user_id::text', name);
        END IF;
        EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I '
                       'CHECK (octet_length(user_id) BETWEEN 1 AND 255)',
                       name, name || '_user_id_length');
    END LOOP;
END $$;

ALTER TABLE refunds ADD CONSTRAINT refunds_user_id_payment_id_fkey
    FOREIGN KEY (user_id, payment_id) REFERENCES payments (user_id, payment_id);

-- As 20261207000001_routine_trail_on_movements.sql made it.
CREATE VIEW key_trail AS
SELECT user_id, event_id, key, resource_id, at, event, detail, request_id, request_id_text,
       trace_id, operator, reason, repeats
FROM key_events
UNION ALL
SELECT user_id, claim_event_id, NULL, payment_id, created_at, 'claimed'::key_event_kind, NULL,
       claim_request_id, claim_request_id_text, claim_trace_id, NULL, NULL, 1
FROM payments WHERE claim_event_id IS NOT NULL
UNION ALL
SELECT user_id, answer_event_id, NULL, payment_id, finished_at, 'bank_answered',
       CASE WHEN status = 'declined' THEN 'declined: ' || decline_reason ELSE 'succeeded' END,
       claim_request_id, claim_request_id_text, claim_trace_id, NULL, NULL, 1
FROM payments WHERE answer_event_id IS NOT NULL;
