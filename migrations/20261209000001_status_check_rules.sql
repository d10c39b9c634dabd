-- The rail's rules on status checks (SPEC §3 `status_checks`; docs/design.md, "Status checks
-- the rail allows"). Each key carries its movement's checks: how many were sent (never more than
-- the policy's at_most, whichever replica or restart sends them; a re-claim keeps the count) and
-- when the last went. `settlement_due_at` is set when a movement's checks ran out undecided: it
-- then waits for the bank's settlement file, and no reconciler takes it. `status_check_pace` is
-- the deployment's one budget of checks a second: every replica takes the next slot from it.
-- Added columns with defaults, so the release before this one runs beside it.
ALTER TABLE idempotency_keys
    ADD COLUMN status_checks smallint NOT NULL DEFAULT 0 CHECK (status_checks >= 0),
    ADD COLUMN last_status_check_at timestamptz,
    ADD COLUMN settlement_due_at timestamptz;

CREATE TABLE status_check_pace (
    id           smallint PRIMARY KEY CHECK (id = 1),
    next_slot_at timestamptz NOT NULL
);
INSERT INTO status_check_pace (id, next_slot_at) VALUES (1, to_timestamp(0));

-- The bank's settlement file names movements by their reference (`backend settle`).
CREATE INDEX payments_by_bank_reference ON payments (bank_reference);
CREATE INDEX refunds_by_bank_reference ON refunds (bank_reference);
