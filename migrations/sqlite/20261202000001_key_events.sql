-- The PostgreSQL migration of the same name: the audit trail, one row per event of a key
-- (times in unix microseconds, UUIDs as 16-byte blobs, as everywhere in this store).
CREATE TABLE key_events (
    event_id    INTEGER PRIMARY KEY,
    user_id     INTEGER NOT NULL,
    key         BLOB    CHECK (key IS NULL OR length(key) = 16),
    resource_id BLOB    CHECK (resource_id IS NULL OR length(resource_id) = 16),
    at          INTEGER NOT NULL DEFAULT (CAST(unixepoch('subsec') * 1000000 AS INTEGER)),
    event       TEXT    NOT NULL,
    detail      TEXT,
    request_id  TEXT,
    operator    TEXT,
    reason      TEXT,
    repeats     INTEGER NOT NULL DEFAULT 1
);
-- A customer's trail, in the order it was written (PostgreSQL's primary key): SQLite ends every
-- index with the rowid, here event_id, so naming it again is needless, and with it a row-value
-- `(user_id, event_id) IN (…)` finds nothing (seen on SQLite 3.40), which broke the janitor's delete.
CREATE INDEX key_events_by_user ON key_events (user_id);
CREATE INDEX key_events_by_age ON key_events (at);
-- The console's queue lists late debits (money that moved after its claim was released).
CREATE INDEX key_events_late_debits ON key_events (at) WHERE event = 'late_debit_found';

CREATE TRIGGER key_events_expired AFTER DELETE ON idempotency_keys
BEGIN
    INSERT INTO key_events (user_id, key, resource_id, event, detail)
    VALUES (OLD.user_id, OLD.key, OLD.resource_id, 'expired', 'the key was deleted in state ' || OLD.state);
END;
