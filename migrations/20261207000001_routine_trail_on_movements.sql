-- A payment's routine events kept on its own row (issue 29; docs/design.md, "The audit trail"):
-- the claim (`claimed`) and the claimant's own record of the bank's final word
-- (`bank_answered`) are written by the two statements every new payment runs, and both
-- statements write the payment's row already. So their event ids, and the claiming request's id
-- and trace id, go on that row (the events' times are the row's `created_at` and `finished_at`,
-- the answer's words its `status` and `decline_reason`) instead of two `key_events` rows with
-- their index entries.
--
-- The request that claims a payment is nearly always the one that records the bank's answer,
-- so the answer takes only an event id. When another request records it (a retry that claimed
-- the key again after a release), its `bank_answered` is a `key_events` row naming that
-- request, as is every event that is not routine, and a refund's (its claim is a transaction of
-- several statements, and a `key_events` row).
--
-- The ids come from `key_events`'s own sequence, so every event of a customer, wherever it is
-- kept, has one id in the order it was written, and the trail reads and pages as before. The
-- view `key_trail` is the trail as one relation: reads, the console and ad hoc SQL use it.
--
-- The routine events live as long as their payment (kept for ever), not
-- `AUDIT_TRAIL_KEEP_DAYS` after the key. The new columns are nullable without defaults, so
-- adding them rewrites no row; rows written before keep their events in `key_events`.
ALTER TABLE payments
    ADD COLUMN claim_event_id        bigint,
    ADD COLUMN answer_event_id       bigint,
    ADD COLUMN claim_request_id      uuid,
    ADD COLUMN claim_trace_id        bytea CHECK (octet_length(claim_trace_id) = 16),
    ADD COLUMN claim_request_id_text text,
    ADD CONSTRAINT payments_one_claim_request_id
        CHECK (claim_request_id IS NULL OR claim_request_id_text IS NULL),
    ADD CONSTRAINT payments_answer_on_the_row_after_its_claim
        CHECK (answer_event_id IS NULL OR answer_event_id > claim_event_id);

-- The trail whole: `key_events`, then the routine events read off the payments' rows, in the
-- same columns. A routine event names its claim (`resource_id`) but not its key: the key's row
-- is deleted when it expires, and the claim leads to it while it lives.
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
