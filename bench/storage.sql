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
       -- Ten payments a second, each claimed at its own instant and answered a second later:
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

INSERT INTO payments (payment_id, user_id, bill_id, amount_paise, payer_vpa, status,
                      bank_reference, created_at, finished_at)
SELECT payment_id, user_id, bill_id, amount_paise, payer_vpa, 'succeeded',
       'pay-' || user_id || '-' || key, at, at + interval '1 second'
FROM generated;

INSERT INTO idempotency_keys (user_id, key, operation, state, fingerprint, resource_id,
                              created_at, claimed_at, expires_at)
SELECT user_id, key, 'pay_bill', 'done', fingerprint, payment_id, at, at, at + interval '48 hours'
FROM generated;

-- Each payment's audit trail as the backend writes it: `claimed` with the claim, then
-- `bank_answered` with the outcome, each with the request's X-Request-Id (a UUID, as the edge
-- mints it: the `request_id` column's 16 bytes) and its trace id (16 bytes).
INSERT INTO key_events (user_id, key, resource_id, at, event, request_id, trace_id)
SELECT user_id, key, payment_id, at, 'claimed', gen_random_uuid(), decode(md5(n::text), 'hex')
FROM generated;
INSERT INTO key_events (user_id, key, resource_id, at, event, detail, request_id, trace_id)
SELECT user_id, key, payment_id, at + interval '1 second', 'bank_answered', 'succeeded',
       gen_random_uuid(), decode(md5(n::text), 'hex')
FROM generated;

VACUUM ANALYZE idem_keys;
VACUUM ANALYZE payments;
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
SELECT 'ours key_events, two per payment (table + indexes)',
       pg_size_pretty(pg_total_relation_size('key_events'))
UNION ALL
SELECT 'ours key_events, bytes per payment',
       (pg_total_relation_size('key_events') / :rows)::text
UNION ALL
SELECT 'ours payments (table + indexes; kept for ever in both designs)',
       pg_size_pretty(pg_total_relation_size('payments'))
UNION ALL
SELECT 'ratio ours/article, key tables',
       round(pg_total_relation_size('idempotency_keys')::numeric
             / pg_total_relation_size('idem_keys'), 3)::text
UNION ALL
SELECT 'ratio ours/article, a finished key with its trail (aim <= 0.6)',
       round((pg_total_relation_size('idempotency_keys') + pg_total_relation_size('key_events'))::numeric
             / pg_total_relation_size('idem_keys'), 3)::text
UNION ALL
SELECT 'ratio ours/article, keys + payments vs keys alone',
       round((pg_total_relation_size('idempotency_keys') + pg_total_relation_size('payments'))::numeric
             / pg_total_relation_size('idem_keys'), 3)::text;
