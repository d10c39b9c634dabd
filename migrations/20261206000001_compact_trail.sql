-- The audit trail's rows made compact (issue 29; docs/figures.md, "Storage"): the event's kind
-- as a 4-byte enum instead of its name as text, and a request id that is a UUID in canonical
-- form (lower-case, hyphenated: the edge's and the backend's own, the common case) as its 16
-- bytes instead of 37 characters of text. A request id a client chose that is anything else is
-- kept as sent, in `request_id_text`; a row has at most one of the two. Nothing the console
-- shows is lost.
--
-- Changed in place (ALTER), not rebuilt and swapped: the table keeps its privileges (a runtime
-- role's grants, docs/operations.md), its event ids and its identity sequence. The type changes
-- rewrite the table under an exclusive lock: on a large trail, run `backend migrate` as a
-- release step in a quiet window (CHANGELOG.md).
CREATE TYPE key_event_kind AS ENUM (
    'claimed', 'claimed_again', 'replayed', 'mismatch_refused', 'in_progress_refused', 'waited',
    'bank_answered', 'bank_answer_unknown', 'looked_up', 'released', 'late_debit_found',
    'resolved', 'voided', 'expired', 'operator_lookup', 'ledger_checked', 'customer_viewed');

ALTER TABLE key_events ADD COLUMN request_id_text text;
UPDATE key_events SET request_id_text = request_id
WHERE request_id !~ '^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$';

-- The partial index names the event as text; it is made again on the enum.
DROP INDEX key_events_late_debits;
ALTER TABLE key_events
    ALTER COLUMN event TYPE key_event_kind USING event::key_event_kind,
    ALTER COLUMN request_id TYPE uuid USING
        CASE WHEN request_id_text IS NULL THEN request_id::uuid END,
    ADD CONSTRAINT key_events_one_request_id
        CHECK (request_id IS NULL OR request_id_text IS NULL);
COMMENT ON COLUMN key_events.request_id IS
    'The causing request''s X-Request-Id when it is a UUID in canonical form, else NULL';
COMMENT ON COLUMN key_events.request_id_text IS
    'The causing request''s X-Request-Id when it is anything else (1 to 64 visible characters)';
-- The console's queue lists late debits (money that moved after its claim was released).
CREATE INDEX key_events_late_debits ON key_events (at) WHERE event = 'late_debit_found';
