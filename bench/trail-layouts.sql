-- Three layouts of a payment's routine audit trail that the schema does not use (it keeps them
-- on the payment's row: bench/storage.sql), measured on the same 400,000 payments with the same
-- distinct times (docs/figures.md, "Storage"), for the record:
-- - event_rows: two `key_events` rows a payment, as the backend wrote them before;
-- - widest_first: today's columns (enum kind, UUID request id) in a rebuilt table ordered
--   widest first, so no byte goes to alignment (what an in-place migration cannot do);
-- - one_row_per_claim: the claim and the bank's reply as one row, updated by the outcome
--   (two event times, two request ids, two trace ids, the outcome), not two appended rows.
-- Run in a scratch database: psql -d scratch -f bench/trail-layouts.sql
\set rows 400000
CREATE TEMP TABLE generated AS
SELECT n, (n % 50000) + 1 AS user_id, gen_random_uuid() AS key, gen_random_uuid() AS payment_id,
       now() - (:rows - n) * interval '100 milliseconds' AS at
FROM generate_series(1, :rows) AS n;
CREATE TYPE layout_event_kind AS ENUM ('claimed', 'bank_answered');

CREATE TABLE event_rows (LIKE key_events INCLUDING ALL);
INSERT INTO event_rows (user_id, key, resource_id, at, event, request_id, trace_id)
SELECT user_id, key, payment_id, at, 'claimed', gen_random_uuid(), decode(md5(n::text), 'hex')
FROM generated;
INSERT INTO event_rows (user_id, key, resource_id, at, event, detail, request_id, trace_id)
SELECT user_id, key, payment_id, at + interval '1 second', 'bank_answered', 'succeeded',
       gen_random_uuid(), decode(md5(n::text), 'hex')
FROM generated;

CREATE TABLE widest_first (
    user_id bigint NOT NULL, event_id bigint GENERATED ALWAYS AS IDENTITY,
    at timestamptz NOT NULL DEFAULT now(), repeats bigint NOT NULL DEFAULT 1,
    event layout_event_kind NOT NULL, key uuid, resource_id uuid, request_id uuid,
    trace_id bytea, request_id_text text, detail text, operator text, reason text,
    PRIMARY KEY (user_id, event_id));
CREATE INDEX ON widest_first (at);
-- The same events, in the order they were written.
INSERT INTO widest_first (user_id, key, resource_id, at, event, detail, request_id, trace_id)
SELECT user_id, key, resource_id, at, event::text::layout_event_kind, detail, request_id, trace_id
FROM event_rows ORDER BY event_id;

CREATE TABLE one_row_per_claim (
    user_id bigint NOT NULL, story_id bigint GENERATED ALWAYS AS IDENTITY,
    claimed_at timestamptz NOT NULL, replied_at timestamptz, key uuid, resource_id uuid,
    claim_request_id uuid, reply_request_id uuid, outcome layout_event_kind,
    claim_trace_id bytea, reply_trace_id bytea, PRIMARY KEY (user_id, story_id));
CREATE INDEX ON one_row_per_claim (claimed_at);
INSERT INTO one_row_per_claim (user_id, key, resource_id, claimed_at, replied_at,
                               claim_request_id, reply_request_id, outcome, claim_trace_id,
                               reply_trace_id)
SELECT user_id, key, payment_id, at, at + interval '1 second', gen_random_uuid(), gen_random_uuid(),
       'bank_answered', decode(md5(n::text), 'hex'), decode(md5(n::text), 'hex')
FROM generated;

VACUUM ANALYZE event_rows;
VACUUM ANALYZE widest_first;
VACUUM ANALYZE one_row_per_claim;
SELECT layout, pg_total_relation_size(layout) / :rows AS bytes_per_payment
FROM unnest(ARRAY['event_rows', 'widest_first', 'one_row_per_claim']::regclass[]) AS layout;
DROP TABLE event_rows, widest_first, one_row_per_claim;
DROP TYPE layout_event_kind;
