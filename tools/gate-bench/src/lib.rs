//! The edge gate's work on one guarded request, repeated: [`check_rounds`] runs
//! [`Gate::route`] and [`Gate::check`] on a fixed `POST /v1/bills/{bill}/pay` with a valid
//! bearer token, a valid `Idempotency-Key` and a [`BODY_BYTES`]-byte JSON body, as the Worker's
//! fetch handler does for every guarded request: the policy compiled in by `edge/build.rs`, the
//! token verifier from [`EdgeConfig::from_settings`] with the Worker's default token rules.
//!
//! The body is the heaviest valid payment body: the longest `payer_vpa` the field check allows
//! (255 bytes), padded to [`BODY_BYTES`] with white space between the members, because the
//! pay body takes no other field. Every byte goes through the depth scan and the JSON parser;
//! the fingerprint hashes the canonical form, the ~300 bytes without the white space.
//!
//! Natively the crate's binary times it; in Wasm `bench/edge-gate.sh` loads the module in Node
//! (`wasm-bindgen --target nodejs`) and `bench/edge-gate.mjs` times the same function.

use std::hint::black_box;

use edge::config::{BACKEND_URL_VAR, EdgeConfig, EdgeTokens, JWT_SECRET_VAR, compiled_policy};
use edge::gate::{BodyRead, Gate, GuardedRequest, Verdict};
use shared::auth::{UserId, sign_token};
use wasm_bindgen::prelude::wasm_bindgen;

/// The length of the request body, in bytes.
pub const BODY_BYTES: usize = 1024;

/// The time the token is checked at, fixed so the module needs no clock.
const NOW_UNIX: i64 = 1_800_000_000;

/// A production-grade secret (32 bytes or more, not the development one).
const JWT_SECRET: &str = "gate-bench-secret-of-at-least-32-bytes";

/// The user the token names.
const USER: u64 = 42;

/// The guarded request's method and path.
const METHOD: &str = "POST";
const PATH: &str = "/v1/bills/elec-42/pay";

/// A version 4 UUID, the policy's key format.
const IDEMPOTENCY_KEY: &[u8] = b"8e03978e-40d5-43e8-bc93-6894a57f9324";

/// The longest `payer_vpa` the field check allows: 255 bytes, `name@handle`.
fn longest_payer_vpa() -> String {
    let handle = "@okbank";
    let name: String = "asha.k-99_"
        .chars()
        .cycle()
        .take(255 - handle.len())
        .collect();
    name + handle
}

/// The pay body: the amount and the longest `payer_vpa`, with white space before the VPA to
/// make it [`BODY_BYTES`] long.
fn pay_body() -> Vec<u8> {
    let amount = r#"{"amount_paise":230000,"#;
    let vpa = format!(r#""payer_vpa":"{}"}}"#, longest_payer_vpa());
    let indent = " ".repeat(BODY_BYTES - amount.len() - "\n".len() - vpa.len());
    format!("{amount}\n{indent}{vpa}").into_bytes()
}

/// Runs the gate on the fixed request `rounds` times and returns how many it admitted (as an
/// attempt to coordinate): `rounds` when the request is what it should be, and the count
/// depends on every check, so the work cannot be optimised away.
#[wasm_bindgen]
pub fn check_rounds(rounds: u32) -> u32 {
    let config = EdgeConfig::from_settings(|name| match name {
        BACKEND_URL_VAR => Some("http://127.0.0.1:8080".to_owned()),
        JWT_SECRET_VAR => Some(JWT_SECRET.to_owned()),
        _ => None,
    })
    .expect("the bench's settings are valid");
    let EdgeTokens::Secret(tokens) = config.tokens() else {
        unreachable!("the bench's settings name a secret");
    };
    let gate = Gate::new(compiled_policy());
    let user = UserId::numbered(USER);
    let authorization = format!(
        "Bearer {}",
        sign_token(user, NOW_UNIX + 60, JWT_SECRET.as_bytes())
    );
    let key_header_values = [IDEMPOTENCY_KEY];
    let body = pay_body();
    let mut admitted = 0;
    for _ in 0..rounds {
        let Some(route) = gate.route(black_box(METHOD), black_box(PATH)) else {
            continue;
        };
        // The HS256 check the runtime makes before the gate, then the gate.
        let user = tokens.verify_authorization(Some(black_box(authorization.as_bytes())), NOW_UNIX);
        let request = GuardedRequest {
            user,
            key_header_values: black_box(&key_header_values),
            // The runtime reads every body into a fresh buffer.
            body: BodyRead::Complete(black_box(&body).clone()),
        };
        if let Verdict::Coordinate { attempt, .. } = gate.check(&route, request) {
            black_box(attempt);
            admitted += 1;
        }
    }
    admitted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_is_exactly_the_advertised_size() {
        assert_eq!(pay_body().len(), BODY_BYTES);
    }

    #[test]
    fn every_round_is_admitted() {
        assert_eq!(check_rounds(3), 3);
    }
}
