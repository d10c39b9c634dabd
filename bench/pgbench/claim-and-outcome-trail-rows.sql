-- A hand-written baseline, not generated and not checked against the code (bench/pgbench/README).
-- claim-and-outcome.sql as it was before a payment's routine events were kept on its row (issue
-- 29): the claim and the outcome each insert a `key_events` row.
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
told AS (
    INSERT INTO key_events (user_id, key, resource_id, event, request_id, trace_id,
                            request_id_text)
    SELECT :user, md5(:key_n::text)::uuid, resource_id, 'claimed', gen_random_uuid(),
           decode(md5(:payment_n::text), 'hex'), NULL FROM claimed),
paid AS (
    INSERT INTO payments (payment_id, user_id, bill_id, amount_paise, payer_vpa, status,
                          bank_reference)
    SELECT resource_id, :user, 'elec-1', 230000, 'asha@okbank', 'pending',
           'pay-' || md5('p' || :payment_n)::uuid FROM claimed
    RETURNING payment_id, user_id, bill_id, amount_paise, payer_vpa, status, bank_reference,
              decline_reason)
SELECT paid.*, claimed.expires_at FROM paid, claimed;
WITH moved AS (
    UPDATE payments SET status = 'succeeded', decline_reason = NULL, finished_at = now()
    WHERE payment_id = md5('p' || :payment_n)::uuid AND user_id = :user AND status = 'pending'
    RETURNING payment_id, user_id, bill_id, amount_paise, payer_vpa, status, bank_reference,
           decline_reason),
done AS (
    UPDATE idempotency_keys SET state = 'done', next_lookup_at = NULL, lease_owner = NULL,
           lease_until = NULL
    WHERE user_id = :user AND key = md5(:key_n::text)::uuid AND resource_id = md5('p' || :payment_n)::uuid AND state <> 'done'
      AND EXISTS (SELECT 1 FROM moved)
    RETURNING fingerprint, state, operation, resource_id, created_at, claimed_at, expires_at,
              now() AS read_at, awaited),
told AS (SELECT pg_notify('idempotency_key_changed',
       :user::text || ' ' || md5(:key_n::text)::uuid::text) FROM done WHERE awaited),
recorded AS (
    INSERT INTO key_events (user_id, key, resource_id, event, detail, request_id, trace_id,
                            request_id_text)
    SELECT :user, md5(:key_n::text)::uuid, md5('p' || :payment_n)::uuid, 'bank_answered',
           'succeeded', gen_random_uuid(), decode(md5(:payment_n::text), 'hex'), NULL FROM done)
SELECT moved.*, done.fingerprint, done.state, done.operation, done.resource_id,
       done.created_at, done.claimed_at, done.expires_at, done.read_at,
       (SELECT count(*) FROM told) AS told
FROM moved LEFT JOIN done ON true;
