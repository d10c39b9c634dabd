-- pgbench: a shape not built (docs/design.md, "Not built: the key's outcome update"): the
-- payment as claim-and-outcome.sql sends it, but with no update of the key at the outcome (the
-- key's `done` would be read from its payment's status) and so no NOTIFY from it. An upper
-- bound on what that shape saves: what would read the key's state instead is not here.
-- Hand-written from claim-and-outcome.sql as generated on 2026-12-04.
\set user random(1, 100000)
\set key_n random(1, 281474976710655)
\set payment_n random(1, 281474976710655)
WITH claimed AS (
    INSERT INTO idempotency_keys (user_id, key, operation, state, fingerprint, resource_id,
                                  lease_owner, lease_until, expires_at)
    VALUES (:user, md5(:key_n::text)::uuid, 'pay_bill', 'started', sha256('body'::bytea),
           md5('p' || :payment_n)::uuid, gen_random_uuid(), now() + interval '6 seconds',
           now() + interval '48 hours')
    ON CONFLICT (user_id, key) DO NOTHING RETURNING resource_id, expires_at),
paid AS (
    INSERT INTO payments (payment_id, user_id, bill_id, amount_paise, payer_vpa, status,
                          bank_reference, claim_event_id, claim_request_id, claim_trace_id,
                          claim_request_id_text)
    SELECT resource_id, :user, 'elec-1', 230000, 'asha@okbank', 'pending',
           'pay-' || md5('p' || :payment_n)::uuid, nextval('key_events_event_id_seq'),
           md5('r' || :payment_n)::uuid, decode(md5(:payment_n::text), 'hex'), NULL FROM claimed
    RETURNING payment_id, user_id, bill_id, amount_paise, payer_vpa, status, bank_reference,
              decline_reason)
SELECT paid.*, claimed.expires_at FROM paid, claimed;
WITH moved AS (
    UPDATE payments SET status = 'succeeded', decline_reason = NULL, finished_at = now(),
           answer_event_id = CASE WHEN claim_event_id IS NOT NULL AND (md5('r' || :payment_n)::uuid,
           decode(md5(:payment_n::text), 'hex'), NULL) IS NOT DISTINCT FROM (claim_request_id,
           claim_trace_id, claim_request_id_text) THEN nextval('key_events_event_id_seq') END
    WHERE payment_id = md5('p' || :payment_n)::uuid AND user_id = :user AND status = 'pending'
    RETURNING payment_id, user_id, bill_id, amount_paise, payer_vpa, status, bank_reference,
           decline_reason, answer_event_id IS NOT NULL AS replied_on_the_row),
recorded AS (
    INSERT INTO key_events (user_id, key, resource_id, event, detail, request_id, trace_id,
                            request_id_text)
    SELECT :user, md5(:key_n::text)::uuid, md5('p' || :payment_n)::uuid, 'bank_answered',
           'succeeded', md5('r' || :payment_n)::uuid, decode(md5(:payment_n::text), 'hex'),
           NULL FROM moved WHERE NOT replied_on_the_row)
SELECT moved.* FROM moved;
