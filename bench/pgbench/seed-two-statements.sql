-- A hand-written baseline, not generated and not checked against the code (bench/pgbench/README).
-- pgbench: the seed article's two statements on its own `idem_keys` table
-- (shared/reference/idempotency-keys-article.txt; bench/pgbench/seed-table.sql makes it): the
-- claim, then the saved response, each committed on its own. What a new payment costs the
-- database with no payments table, no leases, no NOTIFY and no audit trail.
\set user random(1, 100000)
\set key_n random(1, 281474976710655)
INSERT INTO idem_keys (user_id, key, fp, status)
VALUES (:user, md5(:key_n::text), encode(sha256('body'::bytea), 'hex'), 'started')
ON CONFLICT DO NOTHING RETURNING key;
UPDATE idem_keys SET status = 'done', code = 201,
       response = '{"payment_id":"d152c332-3b7e-4330-b747-f506c13e63f1","bill_id":"elec-1","amount_paise":230000,"status":"succeeded","bank_reference":"pay-d152c332-3b7e-4330-b747-f506c13e63f1"}'
WHERE user_id = :user AND key = md5(:key_n::text);
