-- The audit trail's events carry the trace id of the request that caused them (the W3C trace
-- context's 16 bytes; docs/operations.md, "Traces"), so an event leads to the request's trace
-- and log lines. NULL for the reconciler's and the janitor's own work and for events written
-- before this column. Nullable and without a default: adding it rewrites no row.
ALTER TABLE key_events ADD COLUMN trace_id bytea CHECK (octet_length(trace_id) = 16);
