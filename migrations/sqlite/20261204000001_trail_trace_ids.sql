-- The PostgreSQL migration of the same name, for the embedded store: the trace id of the
-- request that caused an event (16 bytes), NULL where no request did.
ALTER TABLE key_events ADD COLUMN trace_id BLOB CHECK (trace_id IS NULL OR length(trace_id) = 16);
