-- pgbench: one new-key payment as the backend sends it to PostgreSQL, generated from
-- backend/src/store/claims/postgres.rs (backend/src/store/pgbench_scripts.rs): the claim
-- with its pending payment carrying its `claimed` event (one statement, committed before
-- the bank is called), then the bank's final word as one statement (movement with its
-- `bank_answered` event, key `done`, the NOTIFY if a request waits on the key).
\set user random(1, 100000)
\set key_n random(1, 281474976710655)
\set payment_n random(1, 281474976710655)
WITH claimed AS (
    INSERT INTO idempotency_keys (user_id, key, operation, state, fingerprint, resource_id,
                              lease_owner, lease_until, expires_at, claim_token)
VALUES (:user, md5(:key_n::text)::uuid, 'pay_bill', 'started', sha256('body'::bytea),
       md5('p' || :payment_n)::uuid, gen_random_uuid(), now() + interval '6 seconds',
       now() + interval '48 hours', gen_random_uuid())
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
done AS (
    UPDATE idempotency_keys SET state = 'done', next_lookup_at = NULL, lease_owner = NULL,
           lease_until = NULL
    WHERE user_id = :user AND key = md5(:key_n::text)::uuid AND resource_id = md5('p' || :payment_n)::uuid AND state <> 'done'
      AND EXISTS (SELECT 1 FROM moved)
    RETURNING user_id, key, operation, state, fingerprint, resource_id, created_at, claimed_at,
           expires_at, status_checks, settlement_due_at, now() AS read_at, awaited),
told AS (SELECT pg_notify('idempotency_key_changed',
       :user::text || ' ' || md5(:key_n::text)::uuid::text) FROM done WHERE awaited),
recorded AS (
    INSERT INTO key_events (user_id, key, resource_id, event, detail, request_id, trace_id,
                            request_id_text)
    SELECT :user, md5(:key_n::text)::uuid, md5('p' || :payment_n)::uuid, 'bank_answered',
           'succeeded', md5('r' || :payment_n)::uuid, decode(md5(:payment_n::text), 'hex'),
           NULL FROM moved WHERE NOT replied_on_the_row)
SELECT moved.*, done.operation, done.state, done.fingerprint, done.resource_id, done.created_at,
       done.claimed_at, done.expires_at, done.status_checks, done.settlement_due_at, done.read_at,
       (SELECT count(*) FROM told) AS told
FROM moved LEFT JOIN done ON true;
