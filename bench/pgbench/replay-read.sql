-- pgbench: the backend's replay read, generated from backend/src/store/sql/keys.rs
-- (select_key; backend/src/store/pgbench_scripts.rs): the key and its finished payment
-- in one joined query, for one of the keys replay-keys.sql wrote.
\set n random(1, 100000)
SELECT k.user_id, k.key, k.operation, k.state, k.fingerprint, k.resource_id, k.created_at,
       k.claimed_at, k.expires_at, k.status_checks, k.settlement_due_at, now() AS read_at,
       p.payment_id AS p_payment_id, p.user_id AS p_user_id, p.bill_id AS p_bill_id,
       p.amount_paise AS p_amount_paise, p.payer_vpa AS p_payer_vpa, p.status AS p_status,
       p.bank_reference AS p_bank_reference, p.decline_reason AS p_decline_reason,
       r.refund_id AS r_refund_id, r.payment_id AS r_payment_id, r.user_id AS r_user_id,
       r.amount_paise AS r_amount_paise, r.status AS r_status, r.bank_reference AS r_bank_reference,
       r.debit_reference AS r_debit_reference, r.decline_reason AS r_decline_reason
FROM idempotency_keys k
LEFT JOIN payments p
  ON k.state = 'done' AND k.operation = 'pay_bill'
     AND p.user_id = k.user_id AND p.payment_id = k.resource_id
LEFT JOIN refunds r
  ON k.state = 'done' AND k.operation = 'refund_payment'
     AND r.user_id = k.user_id AND r.refund_id = k.resource_id
WHERE k.user_id = (1000 + :n % 100)::text AND k.key = md5(:n::text)::uuid;
