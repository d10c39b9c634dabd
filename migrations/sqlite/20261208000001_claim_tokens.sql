-- The PostgreSQL migration of the same name: the claim instance's token, which every write on
-- behalf of one claim matches; a reconciler's lease never changes it.
ALTER TABLE idempotency_keys ADD COLUMN claim_token BLOB CHECK (claim_token IS NULL OR length(claim_token) = 16);
