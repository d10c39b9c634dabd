-- Reconciliation takes a key under a lease written on its row, on PostgreSQL as on SQLite
-- (docs/design.md, "Reconciliation"): `lease_owner` is a fresh id per taking and `lease_until`
-- when it runs out. Every write of the bank's answer checks the row still names its owner, so
-- no transaction (and no pooled connection) is held open across a bank look-up, and a
-- reconciler that died frees its keys when their leases run out. NULL: nobody holds the key.
ALTER TABLE idempotency_keys ADD COLUMN lease_owner uuid, ADD COLUMN lease_until timestamptz;
