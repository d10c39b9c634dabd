-- Each claim and re-claim of a key is one claim instance, named by a token its request mints
-- and writes here (docs/design.md, "A release is tied to its claim"). Every write on behalf of
-- that attempt (marking its call unknown, releasing it unsent) matches it, so a leftover write of
-- an earlier claim never changes a key claimed again since. Unlike `lease_owner`, a reconciler's
-- lease never changes it. NULL on rows claimed before this migration: no token matches them.
-- Nullable and unread by the release before it, so both releases run side by side.
ALTER TABLE idempotency_keys ADD COLUMN claim_token uuid;
