-- The trail as one relation, `key_trail`, as on PostgreSQL, so reads are the same SQL on both
-- stores. PostgreSQL keeps a payment's routine events (`claimed`, `bank_answered`) on the
-- payment's row, with ids from `key_events`'s sequence (the migration of the same name there).
-- SQLite has no sequence to share between tables: an event's id is its row's `rowid` in
-- `key_events`, so every event, the routine ones included, stays a row of `key_events`, and
-- the view is that table.
CREATE VIEW key_trail AS
SELECT user_id, event_id, key, resource_id, at, event, detail, request_id, request_id_text,
       trace_id, operator, reason, repeats
FROM key_events;
