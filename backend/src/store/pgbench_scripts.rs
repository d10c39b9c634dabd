//! The pgbench scripts that measure PostgreSQL's limit on the backend's own statements
//! (`bench/perf.sh`) are generated from the statements the code sends: a new-key payment's claim
//! and outcome (`claims/postgres.rs`) and the replay read (`sql/keys.rs`), each parameter put in
//! as a pgbench expression. A test fails when a checked-in script differs from what the code now
//! sends, and `UPDATE_DOCS=1 cargo test -p backend --lib pgbench_scripts` rewrites them. The
//! other scripts in `bench/pgbench/` are hand-written baselines (what the backend sent before a
//! change), marked so in their first line.

use shared::Operation;
use sqlx::Postgres;

use super::claims::postgres::{claim_payment_statement, finish_statement};
use super::key_changes::CHANNEL;
use super::sql::keys::select_key_statement;

const BENCH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../bench/pgbench/");

/// A random key as a pgbench expression: a UUID from a 48-bit pgbench random number (a
/// collision among a run's million keys is one in hundreds of millions).
const KEY: &str = "md5(:key_n::text)::uuid";
/// A random payment id, the same way.
const PAYMENT: &str = "md5('p' || :payment_n)::uuid";
/// A request's trace id: 16 bytes, as the trail stores it.
const TRACE_ID: &str = "decode(md5(:payment_n::text), 'hex')";
/// The request's `X-Request-Id`, a UUID as the edge mints it: the same in the claim and the
/// outcome, since one request makes both.
const REQUEST_ID: &str = "md5('r' || :payment_n)::uuid";

/// `statement` with each `$n` replaced by `values[n - 1]`.
fn with_values(statement: &str, values: &[&str]) -> String {
    let mut out = String::with_capacity(statement.len() * 2);
    let mut rest = statement;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let digits: String = rest[at + 1..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        let n: usize = digits.parse().expect("a numbered parameter after $");
        out.push_str(values[n - 1]);
        rest = &rest[at + 1 + digits.len()..];
    }
    out.push_str(rest);
    out
}

/// `statement` as a script line block: trimmed, lines over 100 characters folded at their
/// commas, ended by `;`.
fn as_script_statement(statement: &str) -> String {
    let mut out = String::new();
    for line in statement.trim().lines() {
        let indent = &line[..line.len() - line.trim_start().len()];
        let mut current = String::new();
        for (i, piece) in line.trim_start().split(", ").enumerate() {
            let next = if i == 0 {
                piece.to_owned()
            } else {
                format!(", {piece}")
            };
            if !current.is_empty() && indent.len() + current.len() + next.len() > 100 {
                out.push_str(&format!("{indent}{},\n", current.trim_end()));
                current = format!("       {}", next.trim_start_matches(", "));
            } else {
                current.push_str(&next);
            }
        }
        out.push_str(&format!("{indent}{current}\n"));
    }
    format!("{};\n", out.trim_end())
}

/// bench/pgbench/claim-and-outcome.sql.
fn claim_and_outcome() -> String {
    let reference = format!("'pay-' || {PAYMENT}");
    let claim = with_values(
        &claim_payment_statement(),
        &[
            ":user",
            KEY,
            "'pay_bill'",
            "sha256('body'::bytea)",
            PAYMENT,
            "gen_random_uuid()",
            "interval '6 seconds'",
            "interval '48 hours'",
            "'elec-1'",
            "230000",
            "'asha@okbank'",
            &reference,
            REQUEST_ID,
            TRACE_ID,
            "NULL",
        ],
    );
    let channel = format!("'{CHANNEL}'");
    let payload = format!(":user::text || ' ' || {KEY}::text");
    let outcome = with_values(
        &finish_statement(Operation::PayBill),
        &[
            PAYMENT,
            ":user",
            "'succeeded'",
            "NULL",
            KEY,
            REQUEST_ID,
            TRACE_ID,
            "NULL",
            "'succeeded'",
            &channel,
            &payload,
        ],
    );
    format!(
        "-- pgbench: one new-key payment as the backend sends it to PostgreSQL, generated from\n\
         -- backend/src/store/claims/postgres.rs (backend/src/store/pgbench_scripts.rs): the claim\n\
         -- with its pending payment carrying its `claimed` event (one statement, committed before\n\
         -- the bank is called), then the bank's final word as one statement (movement with its\n\
         -- `bank_answered` event, key `done`, the NOTIFY if a request waits on the key).\n\
         \\set user random(1, 100000)\n\
         \\set key_n random(1, 281474976710655)\n\
         \\set payment_n random(1, 281474976710655)\n{}{}",
        as_script_statement(&claim),
        as_script_statement(&outcome),
    )
}

/// bench/pgbench/replay-read.sql.
fn replay_read() -> String {
    let read = with_values(
        &select_key_statement::<Postgres>(),
        &["(1000 + :n % 100)::text", "md5(:n::text)::uuid"],
    );
    format!(
        "-- pgbench: the backend's replay read, generated from backend/src/store/sql/keys.rs\n\
         -- (select_key; backend/src/store/pgbench_scripts.rs): the key and its finished payment\n\
         -- in one joined query, for one of the keys replay-keys.sql wrote.\n\
         \\set n random(1, 100000)\n{}",
        as_script_statement(&read),
    )
}

/// Compares `bench/pgbench/{name}` with `generated`, or rewrites it under `UPDATE_DOCS`.
fn check(name: &str, generated: &str) {
    assert!(
        !generated.contains('$'),
        "a parameter left unfilled:\n{generated}"
    );
    let path = format!("{BENCH}{name}");
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    if checked_in == generated {
        return;
    }
    if std::env::var_os("UPDATE_DOCS").is_some() {
        std::fs::write(&path, generated).expect("rewriting the pgbench script");
        return;
    }
    panic!(
        "bench/pgbench/{name} differs from the statements the backend sends; rewrite it with \
         UPDATE_DOCS=1 cargo test -p backend --lib pgbench_scripts"
    );
}

#[test]
fn the_new_key_script_is_the_claim_and_outcome_the_backend_sends() {
    check("claim-and-outcome.sql", &claim_and_outcome());
}

#[test]
fn the_replay_script_is_the_replay_read_the_backend_sends() {
    check("replay-read.sql", &replay_read());
}

#[test]
fn parameters_are_replaced_by_number_not_by_prefix() {
    assert_eq!(
        with_values(
            "$1, $12, $2",
            &["a", "b", "", "", "", "", "", "", "", "", "", "l"]
        ),
        "a, l, b"
    );
}
