-- A hand-written baseline, not generated and not checked against the code (bench/pgbench/README).
-- pgbench: claim-and-outcome.sql without its two audit-trail events: a new-key payment as the
-- backend sent it before the trail (bench/trail.sh compares the two).
\set user random(1, 100000)
WITH claimed AS (
    INSERT INTO idempotency_keys (user_id, key, operation, state, fingerprint, resource_id,
                                  lease_owner, lease_until, expires_at)
    VALUES (:user, gen_random_uuid(), 'pay_bill', 'started', sha256('body'::bytea),
            gen_random_uuid(), gen_random_uuid(), now() + interval '6 seconds',
            now() + interval '48 hours')
    ON CONFLICT (user_id, key) DO NOTHING RETURNING key, resource_id, expires_at)
INSERT INTO payments (payment_id, user_id, bill_id, amount_paise, payer_vpa, status,
                      bank_reference)
SELECT resource_id, :user, 'elec-1', 230000, 'asha@okbank', 'pending', 'pay-' || resource_id
FROM claimed
RETURNING payment_id, (SELECT key FROM claimed) AS key \gset
WITH moved AS (
    UPDATE payments SET status = 'succeeded', decline_reason = NULL, finished_at = now()
    WHERE payment_id = :payment_id::uuid AND user_id = :user AND status = 'pending'
    RETURNING payment_id, user_id, bill_id, amount_paise, payer_vpa, status, bank_reference,
              decline_reason),
done AS (
    UPDATE idempotency_keys
    SET state = 'done', next_lookup_at = NULL, lease_owner = NULL, lease_until = NULL
    WHERE user_id = :user AND key = :key::uuid AND resource_id = :payment_id::uuid AND state <> 'done'
      AND EXISTS (SELECT 1 FROM moved)
    RETURNING fingerprint, state, operation, resource_id, created_at, claimed_at, expires_at,
              now() AS read_at),
told AS (SELECT pg_notify('idempotency_key_changed', :key::text) FROM done)
SELECT moved.*, done.fingerprint, done.state, done.operation, done.resource_id,
       done.created_at, done.claimed_at, done.read_at, (SELECT count(*) FROM told) AS told
FROM moved LEFT JOIN done ON true;
