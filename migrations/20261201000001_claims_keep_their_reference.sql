-- Released claims are kept, and a claim's bank reference is its own (SPEC §4, §7;
-- docs/design.md, "A bank reference per claim", "Release", "Late-debit checks").
--
-- - `released`: the bank never saw the claim's reference. The key and its payment or refund are
--   kept (money rows are never deleted): the retry claims the key again and calls the bank under
--   the same reference, and later look-ups catch a first call that reached the bank late.
-- - `void`: a released movement whose last look-up, just before its key expired, still found
--   nothing at the bank. No money moved; it no longer counts against what remains refundable.
-- - References are now `pay-{payment_id}` / `refund-{refund_id}`, minted at the claim; rows
--   written before this migration keep their `pay-{user_id}-{key}` references unchanged.

ALTER TYPE key_state ADD VALUE 'released';
ALTER TYPE movement_status ADD VALUE 'void';

-- Whether the latest bank call for the key ended with a definite answer that carried no
-- outcome (a 500 or 503, say): nothing of it is still on its way to the bank, so a "never
-- seen" look-up may release the claim at once instead of waiting for `stuck_after`.
ALTER TABLE idempotency_keys ADD COLUMN bank_call_ended boolean NOT NULL DEFAULT false;

-- The reference of the debit a refund reverses, kept on the refund so that a retry after a
-- release can call the bank again without reading the payment.
ALTER TABLE refunds ADD COLUMN debit_reference text;
UPDATE refunds r SET debit_reference = p.bank_reference
  FROM payments p WHERE p.user_id = r.user_id AND p.payment_id = r.payment_id;
ALTER TABLE refunds ALTER COLUMN debit_reference SET NOT NULL;
