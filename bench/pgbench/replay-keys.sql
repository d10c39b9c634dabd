-- The 100,000 finished keys (with their succeeded payments) that replay-read.sql reads.
WITH done AS (
    SELECT g, 1000 + g % 100 AS user_id, md5(g::text)::uuid AS key,
           gen_random_uuid() AS payment_id
    FROM generate_series(1, 100000) AS g),
paid AS (
    INSERT INTO payments (payment_id, user_id, bill_id, amount_paise, payer_vpa, status,
                          bank_reference, finished_at)
    SELECT payment_id, user_id, 'elec-' || g, 230000, 'asha@okbank', 'succeeded',
           'pay-' || payment_id, now()
    FROM done)
INSERT INTO idempotency_keys (user_id, key, operation, state, fingerprint, resource_id)
SELECT user_id, key, 'pay_bill', 'done', sha256(key::text::bytea), payment_id FROM done;
ANALYZE;
