-- The audit trail (SPEC §8; docs/design.md, "The audit trail"): one row per event of a key,
-- appended and never updated. State changes write their event in the same statement or
-- transaction as the change itself (store::sql::events), so a change without its event, or an
-- event without its change, cannot be committed; an expired key's event is written by the
-- trigger below, inside the janitor's DELETE. Observations that change nothing (a replay, a
-- refused mismatch) are appended in batches by one task (backend::trail).
CREATE TABLE key_events (
    user_id     bigint      NOT NULL,
    event_id    bigint      GENERATED ALWAYS AS IDENTITY,
    -- The key's storage UUID; NULL for a customer-level operator event (a ledger check).
    key         uuid,
    -- The payment or refund of the claim the event belongs to: a key claimed again after it
    -- expired is a new story under the same key, told apart by this.
    resource_id uuid,
    at          timestamptz NOT NULL DEFAULT now(),
    event       text        NOT NULL,
    detail      text,
    -- The X-Request-Id of the request that caused the event; NULL for the reconciler's and the
    -- janitor's own work.
    request_id  text,
    -- For an operator's action: who (the operator token's subject) and why (their reason).
    operator    text,
    reason      text,
    -- How many identical observations (same key, same event) one batch folded into this row.
    repeats     bigint      NOT NULL DEFAULT 1,
    -- A customer's trail, in the order it was written, is a range of this key.
    PRIMARY KEY (user_id, event_id)
);
-- The janitor expires the trail oldest first in small batches, as it does keys.
CREATE INDEX key_events_by_age ON key_events (at);
-- The console's queue lists late debits (money that moved after its claim was released).
CREATE INDEX key_events_late_debits ON key_events (at) WHERE event = 'late_debit_found';

-- A key's deletion (expiry) is an event of its own, in the deleting statement's transaction.
CREATE FUNCTION key_events_expired() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO key_events (user_id, key, resource_id, event, detail)
    VALUES (OLD.user_id, OLD.key, OLD.resource_id, 'expired', 'the key was deleted in state ' || OLD.state);
    RETURN OLD;
END $$;
CREATE TRIGGER key_events_expired AFTER DELETE ON idempotency_keys
    FOR EACH ROW EXECUTE FUNCTION key_events_expired();
