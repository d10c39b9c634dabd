-- A hand-written baseline, not generated and not checked against the code (bench/pgbench/README).
-- pgbench: the same payment as claim-and-outcome.sql with the outcome as it was written before
-- (as the backend wrote it before issue 15): BEGIN, the movement's UPDATE, the key's UPDATE, the
-- NOTIFY, COMMIT; five round trips where the new statement takes one.
\set user random(1, 100000)
WITH claimed AS (
    INSERT INTO idempotency_keys (user_id, key, operation, state, fingerprint, resource_id,
                                  lease_owner, lease_until)
    VALUES (:user, gen_random_uuid(), 'pay_bill', 'started', sha256('body'::bytea),
            gen_random_uuid(), gen_random_uuid(), now() + interval '6 seconds')
    ON CONFLICT (user_id, key) DO NOTHING RETURNING key, resource_id)
INSERT INTO payments (payment_id, user_id, bill_id, amount_paise, payer_vpa, status,
                      bank_reference)
SELECT resource_id, :user, 'elec-1', 230000, 'asha@okbank', 'pending', 'pay-' || resource_id
FROM claimed
RETURNING payment_id, (SELECT key FROM claimed) AS key \gset
BEGIN;
UPDATE payments SET status = 'succeeded', decline_reason = NULL, finished_at = now()
WHERE payment_id = :payment_id::uuid AND user_id = :user AND status = 'pending'
RETURNING payment_id, user_id, bill_id, amount_paise, payer_vpa, status, bank_reference,
          decline_reason;
UPDATE idempotency_keys
SET state = 'done', next_lookup_at = NULL, lease_owner = NULL, lease_until = NULL
WHERE user_id = :user AND key = :key::uuid AND resource_id = :payment_id::uuid AND state <> 'done';
SELECT pg_notify('idempotency_key_changed', :key::text);
COMMIT;
