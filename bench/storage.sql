-- Storage of 400,000 finished keys: the article's schema against ours (the key, its payment and
-- its audit trail), loaded side by side in one run. Run by bench/storage.sh into a scratch
-- database that already has our migrations.
\set rows 400000
\timing off

-- The article's table, as printed in reference/idempotency-keys-article.txt.
\ir pgbench/seed-table.sql

-- One generated payment per row, shared by both loads so they describe the same 400,000 payments.
CREATE TEMP TABLE generated AS
SELECT n,
       (n % 50000) + 1                              AS user_id,
       gen_random_uuid()                            AS key,
       gen_random_uuid()                            AS payment_id,
       'elec-2026-11-' || lpad(n::text, 8, '0')     AS bill_id,
       100 + (n::bigint * 7919) % 500000            AS amount_paise,
       'customer' || (n % 50000) || '@okbank'       AS payer_vpa,
       sha256(n::text::bytea)                       AS fingerprint,
       -- Ten payments a second, each claimed at its own instant and replied to a second later:
       -- distinct times, as in a real table (equal ones would shrink every index on a time,
       -- since a B-tree keeps one copy of a repeated value).
       now() - (:rows - n) * interval '100 milliseconds' AS at
FROM generate_series(1, :rows) AS n;

INSERT INTO idem_keys (user_id, key, fp, status, code, created_at, response)
SELECT user_id, key::text, encode(fingerprint, 'hex'), 'done', 201, at,
       jsonb_build_object(
         'payment_id', payment_id, 'bill_id', bill_id, 'amount_paise', amount_paise,
         'status', 'succeeded', 'bank_reference', 'pay-' || user_id || '-' || key,
         'payer_vpa', payer_vpa)
FROM generated;

-- Each payment as the backend writes it, with its two routine audit-trail events on its row:
-- `claimed` with the claim, then `bank_answered` with the outcome, each an id from the trail's
-- sequence, and the claiming request's X-Request-Id (a UUID, as the edge mints it: 16 bytes)
-- and trace id (16 bytes), which the reply shares. Nothing goes to `key_events` for a payment
-- its claimant saw through.
INSERT INTO payments (payment_id, user_id, bill_id, amount_paise, payer_vpa, status,
                      bank_reference, created_at, finished_at, claim_event_id, answer_event_id,
                      claim_request_id, claim_trace_id)
SELECT payment_id, user_id, bill_id, amount_paise, payer_vpa, 'succeeded',
       'pay-' || user_id || '-' || key, at, at + interval '1 second',
       nextval('key_events_event_id_seq'), nextval('key_events_event_id_seq'),
       gen_random_uuid(), decode(md5(n::text), 'hex')
FROM generated;

-- The same payments without their trail columns (the row as it was before the routine events
-- moved onto it), so the trail's share of `payments` is the difference.
CREATE TABLE payments_without_trail (LIKE payments INCLUDING INDEXES);
ALTER TABLE payments_without_trail
    DROP COLUMN claim_event_id, DROP COLUMN answer_event_id, DROP COLUMN claim_request_id,
    DROP COLUMN claim_trace_id, DROP COLUMN claim_request_id_text;
INSERT INTO payments_without_trail (payment_id, user_id, bill_id, amount_paise, payer_vpa,
                                    status, bank_reference, created_at, finished_at)
SELECT payment_id, user_id, bill_id, amount_paise, payer_vpa, 'succeeded',
       'pay-' || user_id || '-' || key, at, at + interval '1 second'
FROM generated;

INSERT INTO idempotency_keys (user_id, key, operation, state, fingerprint, resource_id,
                              created_at, claimed_at, expires_at)
SELECT user_id, key, 'pay_bill', 'done', fingerprint, payment_id, at, at, at + interval '48 hours'
FROM generated;

VACUUM ANALYZE idem_keys;
VACUUM ANALYZE payments;
VACUUM ANALYZE payments_without_trail;
VACUUM ANALYZE idempotency_keys;
VACUUM ANALYZE key_events;

SELECT 'saved reply (article, average bytes)' AS what,
       round(avg(octet_length(response::text)))::text AS value FROM idem_keys
UNION ALL
SELECT 'article idem_keys (table + index)',
       pg_size_pretty(pg_total_relation_size('idem_keys'))
UNION ALL
SELECT 'ours idempotency_keys (table + indexes)',
       pg_size_pretty(pg_total_relation_size('idempotency_keys'))
UNION ALL
SELECT 'ours key_events (what is not routine: none for these payments)',
       pg_size_pretty(pg_total_relation_size('key_events'))
UNION ALL
SELECT 'ours payments (table + indexes; kept for ever in both designs)',
       pg_size_pretty(pg_total_relation_size('payments'))
UNION ALL
SELECT 'ours payments without the trail columns',
       pg_size_pretty(pg_total_relation_size('payments_without_trail'))
UNION ALL
SELECT 'ours trail, bytes per payment (payments less payments without, plus key_events)',
       ((pg_total_relation_size('payments') - pg_total_relation_size('payments_without_trail')
         + pg_total_relation_size('key_events')) / :rows)::text
UNION ALL
SELECT 'ratio ours/article, key tables',
       round(pg_total_relation_size('idempotency_keys')::numeric
             / pg_total_relation_size('idem_keys'), 3)::text
UNION ALL
SELECT 'ratio ours/article, a finished key with its trail (aim <= 0.6)',
       round((pg_total_relation_size('idempotency_keys') + pg_total_relation_size('key_events')
              + pg_total_relation_size('payments')
              - pg_total_relation_size('payments_without_trail'))::numeric
             / pg_total_relation_size('idem_keys'), 3)::text
UNION ALL
SELECT 'ratio ours/article, keys + payments (with their trail) vs keys alone',
       round((pg_total_relation_size('idempotency_keys') + pg_total_relation_size('payments'))::numeric
             / pg_total_relation_size('idem_keys'), 3)::text;
DROP TABLE payments_without_trail;
