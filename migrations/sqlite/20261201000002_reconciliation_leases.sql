-- The PostgreSQL migration of the same name: the lease's owner beside its end (`lease_until`
-- was already here), so every write of a reconciler checks it still holds the key by owner.
ALTER TABLE idempotency_keys ADD COLUMN lease_owner BLOB CHECK (lease_owner IS NULL OR length(lease_owner) = 16);
