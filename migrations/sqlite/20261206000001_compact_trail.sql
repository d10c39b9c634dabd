-- The PostgreSQL migration of the same name, for the embedded store: a request id that is a
-- UUID in canonical form is kept as its 16 bytes in `request_id`, anything else a client sent
-- as text in `request_id_text`; the event's kind is checked against the known names (SQLite
-- keeps it as text, as it does every named state). The table is rebuilt, as SQLite changes a
-- column's type only that way (PostgreSQL's is altered in place, to keep its grants; SQLite has
-- none); every event keeps its id.
CREATE TABLE key_events_compact (
    event_id        INTEGER PRIMARY KEY,
    user_id         INTEGER NOT NULL,
    at              INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    repeats         INTEGER NOT NULL DEFAULT 1,
    event           TEXT    NOT NULL CHECK (event IN (
        'claimed', 'claimed_again', 'replayed', 'mismatch_refused', 'in_progress_refused',
        'waited', 'bank_answered', 'bank_answer_unknown', 'looked_up', 'released',
        'late_debit_found', 'resolved', 'voided', 'expired', 'operator_lookup', 'ledger_checked',
        'customer_viewed')),
    key             BLOB    CHECK (key IS NULL OR length(key) = 16),
    resource_id     BLOB    CHECK (resource_id IS NULL OR length(resource_id) = 16),
    request_id      BLOB    CHECK (request_id IS NULL OR length(request_id) = 16),
    trace_id        BLOB    CHECK (trace_id IS NULL OR length(trace_id) = 16),
    request_id_text TEXT,
    detail          TEXT,
    operator        TEXT,
    reason          TEXT,
    CHECK (request_id IS NULL OR request_id_text IS NULL)
);

INSERT INTO key_events_compact (event_id, user_id, at, repeats, event, key, resource_id,
                                request_id, trace_id, request_id_text, detail, operator, reason)
SELECT event_id, user_id, at, repeats, event, key, resource_id,
       CASE WHEN canonical THEN unhex(replace(request_id, '-', '')) END, trace_id,
       CASE WHEN NOT canonical THEN request_id END, detail, operator, reason
FROM (SELECT *, length(request_id) = 36 AND request_id GLOB
             '[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f]-[0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]'
             AS canonical
      FROM key_events);

-- Dropping the table drops its indexes. The expiry trigger (on idempotency_keys) names the
-- table, and SQLite's rename checks every trigger, so it is dropped first and made again.
DROP TRIGGER key_events_expired;
DROP TABLE key_events;
ALTER TABLE key_events_compact RENAME TO key_events;
CREATE INDEX key_events_by_user ON key_events (user_id);
CREATE INDEX key_events_by_age ON key_events (at);
CREATE INDEX key_events_late_debits ON key_events (at) WHERE event = 'late_debit_found';

CREATE TRIGGER key_events_expired AFTER DELETE ON idempotency_keys
BEGIN
    INSERT INTO key_events (user_id, key, resource_id, event, detail)
    VALUES (OLD.user_id, OLD.key, OLD.resource_id, 'expired', 'the key was deleted in state ' || OLD.state);
END;
