//! The gate: which requests the edge guards, and the checks a guarded request must pass before it
//! may reach the backend.
//!
//! A request is guarded when it is an operation the policy lists in `required_for`
//! ([`Gate::route`]); everything else (reads, health, metrics, unknown routes) passes through
//! unchanged. A guarded request is checked ([`Gate::check`]) by the backend's own checks, in
//! their one order ([`shared::admission::admit`]), with the `shared` problem bodies, so a client
//! gets the same reply wherever it was stopped:
//!
//! 1. the bearer token (401 `unauthenticated`), verified by the runtime beforehand (its
//!    signature may need the identity provider's keys and WebCrypto) and handed in as the
//!    user it names or the reason it was refused;
//! 2. the body's size while it was read (413 `body-too-large`);
//! 3. the body's depth and JSON syntax, then its fingerprint (400 `body-too-deep`/`body-not-json`);
//! 4. the `Idempotency-Key` header (400 `idempotency-key-missing`/`-malformed`);
//! 5. the fields (422 `invalid-field`, naming the field).
//!
//! What passes becomes an [`Attempt`]: the user, key and fingerprint the edge coordinates on.
//! The path parameter is percent-decoded as the backend's router does; a parameter that is not
//! UTF-8 once decoded can never be claimed, and is left to the backend to refuse.

use percent_encoding::percent_decode_str;
use shared::admission::admit;
use shared::auth::AuthError;
use shared::fingerprint::BodyLimits;
use shared::{Fingerprint, IdempotencyKey, KeyError, Operation, Policy, Problem, UserId};

/// The checks of guarded requests, under one policy.
#[derive(Debug, Clone, Copy)]
pub struct Gate<'a> {
    policy: &'a Policy,
    limits: BodyLimits,
}

/// A request to an operation the policy guards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardedRoute {
    /// The operation.
    pub operation: Operation,
    /// Its path parameter (bill id or payment id), percent-decoded.
    pub path_parameter: String,
}

/// The body of a guarded request as the runtime read it, stopping past the size limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyRead {
    /// The whole body, within the limit.
    Complete(Vec<u8>),
    /// More bytes than the limit arrived; reading stopped there.
    TooLarge,
    /// The body could not be read off the connection.
    Unreadable,
}

/// The parts of a guarded request the checks look at.
#[derive(Debug, Clone)]
pub struct GuardedRequest<'r> {
    /// The user the bearer token names, or why it was refused.
    pub user: Result<UserId, AuthError>,
    /// Every value of the policy's key header (the runtime may have folded repeats into one).
    pub key_header_values: &'r [&'r [u8]],
    /// The body.
    pub body: BodyRead,
}

/// What the edge does with a guarded request.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// No valid token: refuse it here with the one 401 every token refusal gets; the reason is
    /// for the log only.
    Unauthenticated(AuthError),
    /// Refuse it here with this problem; the backend never sees it.
    Reject(Problem),
    /// A well-formed attempt: coordinate it with the other attempts of its (user, key), and
    /// forward it with its body if it goes on.
    Coordinate {
        /// Who, with which key and fingerprint.
        attempt: Attempt,
        /// The body as received, to forward unchanged.
        body: Vec<u8>,
    },
}

/// A well-formed attempt at a guarded operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// The authenticated user.
    pub user: UserId,
    /// The idempotency key.
    pub key: IdempotencyKey,
    /// The operation.
    pub operation: Operation,
    /// The fingerprint of the operation, path parameter and canonical body.
    pub fingerprint: Fingerprint,
}

impl Attempt {
    /// The name of the Durable Object that coordinates this (user, key): keys are only ever
    /// looked at together with their user, so two users' equal keys meet different objects.
    /// Unambiguous whatever the subject holds: the key's storage UUID, which has no `/`, is
    /// always the part after the last `/`.
    pub fn coordinator_name(&self) -> String {
        format!("{}/{}", self.user, self.key.storage_uuid())
    }
}

impl<'a> Gate<'a> {
    /// A gate for `policy`, with the backend's body limits.
    pub fn new(policy: &'a Policy) -> Gate<'a> {
        Gate {
            policy,
            limits: BodyLimits::default(),
        }
    }

    /// The body limits; the runtime stops reading a body past `max_bytes`.
    pub fn body_limits(&self) -> BodyLimits {
        self.limits
    }

    /// The guarded operation a request is, or `None` for a request to pass through unchanged.
    pub fn route(&self, method: &str, path: &str) -> Option<GuardedRoute> {
        let (operation, raw_parameter) = Operation::match_path(method, path)?;
        if !self.policy.requires_key(operation) {
            return None;
        }
        let path_parameter = percent_decode_str(raw_parameter)
            .decode_utf8()
            .ok()?
            .into_owned();
        Some(GuardedRoute {
            operation,
            path_parameter,
        })
    }

    /// Checks a guarded request in the backend's order.
    pub fn check(&self, route: &GuardedRoute, request: GuardedRequest<'_>) -> Verdict {
        let user = match &request.user {
            Ok(user) => user.clone(),
            Err(reason) => return Verdict::Unauthenticated(reason.clone()),
        };
        match self.admit(route, user, request) {
            Ok((attempt, body)) => Verdict::Coordinate { attempt, body },
            Err(problem) => Verdict::Reject(problem),
        }
    }

    /// The checks after the token's: body, key, fields.
    fn admit(
        &self,
        route: &GuardedRoute,
        user: UserId,
        request: GuardedRequest<'_>,
    ) -> Result<(Attempt, Vec<u8>), Problem> {
        let body = match request.body {
            BodyRead::Complete(body) => body,
            BodyRead::TooLarge => return Err(Problem::body_too_large(self.limits.max_bytes)),
            BodyRead::Unreadable => return Err(Problem::body_unreadable()),
        };
        let admission = admit(
            (self.policy, self.limits),
            (route.operation, &route.path_parameter),
            request.key_header_values.iter().copied(),
            &body,
        )?;
        // Only operations whose key is required are guarded, so an admitted one has its key.
        let key = admission
            .key
            .ok_or_else(|| Problem::from(&KeyError::Missing))?;
        let attempt = Attempt {
            user,
            key,
            operation: route.operation,
            fingerprint: admission.fingerprint,
        };
        Ok((attempt, body))
    }
}

#[cfg(test)]
mod tests {
    // Under wasm32 the same tests run in Node through wasm-bindgen-test (`.cargo/config.toml`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use shared::ProblemKind;
    use shared::auth::{SubjectError, TokenRules, TokenVerifier, sign_token};
    use shared::problem::UNAUTHENTICATED_DETAIL;

    use shared::fingerprint::fingerprint;

    use super::*;

    const SECRET: &[u8] = b"gate-test-secret-of-at-least-32-bytes";
    const NOW: i64 = 1_800_000_000;
    const KEY: &str = "8e03978e-40d5-43e8-bc93-6894a57f9324";
    const PAY_BODY: &str = r#"{"amount_paise":230000,"payer_vpa":"asha@okbank"}"#;

    fn tokens() -> TokenVerifier {
        TokenVerifier::new(SECRET, TokenRules::default())
    }

    fn bearer(user: u64) -> String {
        let user = UserId::numbered(user);
        format!("Bearer {}", sign_token(user, NOW + 60, SECRET))
    }

    fn pay_route(bill: &str) -> GuardedRoute {
        GuardedRoute {
            operation: Operation::PayBill,
            path_parameter: bill.to_owned(),
        }
    }

    /// Checks a pay request from user 7 unless told otherwise.
    fn check(
        route: &GuardedRoute,
        authorization: Option<&str>,
        keys: &[&str],
        body: BodyRead,
    ) -> Verdict {
        let policy = Policy::default_policy();
        let keys: Vec<&[u8]> = keys.iter().map(|key| key.as_bytes()).collect();
        // As the runtime does for HS256 tokens, before the gate.
        let user = tokens().verify_authorization(authorization.map(str::as_bytes), NOW);
        Gate::new(&policy).check(
            route,
            GuardedRequest {
                user,
                key_header_values: &keys,
                body,
            },
        )
    }

    fn complete(body: &str) -> BodyRead {
        BodyRead::Complete(body.as_bytes().to_vec())
    }

    fn rejected(verdict: Verdict) -> Problem {
        match verdict {
            Verdict::Reject(problem) => problem,
            Verdict::Unauthenticated(reason) => Problem::from(&reason),
            Verdict::Coordinate { attempt, .. } => panic!("expected a refusal, got {attempt:?}"),
        }
    }

    fn kind_of(verdict: Verdict) -> ProblemKind {
        rejected(verdict).kind().expect("a known problem type")
    }

    #[test]
    fn only_operations_in_required_for_are_guarded() {
        let policy = Policy::default_policy();
        let gate = Gate::new(&policy);
        assert_eq!(
            gate.route("POST", "/v1/bills/elec-42/pay"),
            Some(pay_route("elec-42"))
        );
        assert_eq!(
            gate.route("POST", "/v1/payments/7/refunds")
                .map(|route| route.operation),
            Some(Operation::RefundPayment)
        );
        for (method, path) in [
            ("GET", "/v1/payments/7"),
            ("GET", "/v1/bills/elec-42/pay"),
            ("GET", "/healthz"),
            ("GET", "/metrics"),
            ("POST", "/v1/bills/elec-42/pay/"),
            ("POST", "/nowhere"),
        ] {
            assert_eq!(gate.route(method, path), None, "{method} {path}");
        }
        let relaxed = Policy::from_yaml(&shared::policy::DEFAULT_POLICY_YAML.replace(
            "required_for: [pay_bill, refund_payment]",
            "required_for: [pay_bill]",
        ))
        .expect("valid policy");
        let gate = Gate::new(&relaxed);
        assert_eq!(gate.route("POST", "/v1/payments/7/refunds"), None);
    }

    #[test]
    fn path_parameters_are_percent_decoded_like_the_backend_router() {
        let policy = Policy::default_policy();
        let gate = Gate::new(&policy);
        assert_eq!(
            gate.route("POST", "/v1/bills/elec%2D42/pay"),
            Some(pay_route("elec-42"))
        );
        assert_eq!(
            gate.route("POST", "/v1/bills/a%2Fb/pay"),
            Some(pay_route("a/b"))
        );
        // Not UTF-8 once decoded: never claimable, the backend refuses it.
        assert_eq!(gate.route("POST", "/v1/bills/%FF/pay"), None);
    }

    #[test]
    fn a_well_formed_payment_becomes_an_attempt_for_its_user_and_key() {
        let verdict = check(
            &pay_route("elec-42"),
            Some(&bearer(7)),
            &[KEY],
            complete(PAY_BODY),
        );
        let Verdict::Coordinate { attempt, body } = verdict else {
            panic!("expected an attempt, got {verdict:?}");
        };
        assert_eq!(body, PAY_BODY.as_bytes());
        assert_eq!(attempt.user.as_str(), "7");
        assert_eq!(attempt.key.to_string(), KEY);
        assert_eq!(attempt.operation, Operation::PayBill);
        assert_eq!(attempt.coordinator_name(), format!("7/{KEY}"));
        let expected = fingerprint(
            Operation::PayBill,
            "elec-42",
            PAY_BODY.as_bytes(),
            BodyLimits::default(),
        )
        .expect("valid body")
        .fingerprint;
        assert_eq!(attempt.fingerprint, expected);
    }

    #[test]
    fn the_same_key_of_two_users_meets_two_coordinators() {
        let attempt = |user| match check(
            &pay_route("b"),
            Some(&bearer(user)),
            &[KEY],
            complete(PAY_BODY),
        ) {
            Verdict::Coordinate { attempt, .. } => attempt,
            other => panic!("expected an attempt, got {other:?}"),
        };
        assert_ne!(attempt(1).coordinator_name(), attempt(2).coordinator_name());
    }

    #[test]
    fn the_token_is_checked_before_anything_else() {
        let hostile = BodyRead::TooLarge;
        let verdict = check(&pay_route("b"), None, &[], hostile);
        assert_eq!(verdict, Verdict::Unauthenticated(AuthError::Missing));
        let problem = rejected(verdict);
        assert_eq!(problem.kind(), Some(ProblemKind::Unauthenticated));
        assert_eq!(problem.detail.as_deref(), Some(UNAUTHENTICATED_DETAIL));
        assert_eq!(
            check(
                &pay_route("b"),
                Some("Bearer not.a.token"),
                &[KEY],
                complete(PAY_BODY)
            ),
            Verdict::Unauthenticated(AuthError::Malformed)
        );
        let not_a_subject = format!(
            "Bearer {}",
            shared::auth::sign_claims(&serde_json::json!({"sub": "a b", "exp": NOW + 60}), SECRET)
        );
        assert_eq!(
            check(
                &pay_route("b"),
                Some(&not_a_subject),
                &[KEY],
                complete(PAY_BODY)
            ),
            Verdict::Unauthenticated(AuthError::BadSubject(SubjectError::BadCharacter))
        );
    }

    #[test]
    fn body_size_is_checked_before_the_key() {
        let problem = rejected(check(
            &pay_route("b"),
            Some(&bearer(7)),
            &[],
            BodyRead::TooLarge,
        ));
        assert_eq!(problem, Problem::body_too_large(16 * 1024));
        assert_eq!(
            rejected(check(
                &pay_route("b"),
                Some(&bearer(7)),
                &[],
                BodyRead::Unreadable
            )),
            Problem::body_unreadable()
        );
    }

    #[test]
    fn depth_and_json_syntax_are_checked_before_the_key() {
        let deep = "[".repeat(17) + &"]".repeat(17);
        assert_eq!(
            kind_of(check(
                &pay_route("b"),
                Some(&bearer(7)),
                &[],
                complete(&deep)
            )),
            ProblemKind::BodyTooDeep
        );
        assert_eq!(
            kind_of(check(
                &pay_route("b"),
                Some(&bearer(7)),
                &[],
                complete("amount=5")
            )),
            ProblemKind::BodyNotJson
        );
    }

    #[test]
    fn missing_and_malformed_keys_are_refused_before_the_fields() {
        let bad_fields = complete(r#"{"amount_paise":-1}"#);
        assert_eq!(
            kind_of(check(
                &pay_route("b"),
                Some(&bearer(7)),
                &[],
                bad_fields.clone()
            )),
            ProblemKind::IdempotencyKeyMissing
        );
        let problem = rejected(check(
            &pay_route("b"),
            Some(&bearer(7)),
            &["order-1"],
            bad_fields,
        ));
        assert_eq!(problem.kind(), Some(ProblemKind::IdempotencyKeyMalformed));
        assert_eq!(
            problem.detail.as_deref(),
            Some("the Idempotency-Key must be a UUID (version 4)")
        );
    }

    #[test]
    fn fields_are_checked_last_and_named() {
        let problem = rejected(check(
            &pay_route("b"),
            Some(&bearer(7)),
            &[KEY],
            complete(r#"{"amount_paise":2300.5,"payer_vpa":"asha@okbank"}"#),
        ));
        assert_eq!(problem.field.as_deref(), Some("amount_paise"));
        assert_eq!(problem.status, 422);
        let bad_bill = rejected(check(
            &pay_route("a b"),
            Some(&bearer(7)),
            &[KEY],
            complete(PAY_BODY),
        ));
        assert_eq!(bad_bill.field.as_deref(), Some("bill_id"));
        let refund = GuardedRoute {
            operation: Operation::RefundPayment,
            path_parameter: "7".to_owned(),
        };
        let extra = rejected(check(
            &refund,
            Some(&bearer(7)),
            &[KEY],
            complete(r#"{"amount_paise":5,"tip":1}"#),
        ));
        assert_eq!(extra.field.as_deref(), Some("tip"));
    }

    #[test]
    fn replies_equal_the_backend_problems_built_from_the_same_errors() {
        let problem = rejected(check(
            &pay_route("b"),
            Some(&bearer(7)),
            &[],
            complete("{\"a\":"),
        ));
        let expected = Problem::from(
            &fingerprint(Operation::PayBill, "b", b"{\"a\":", BodyLimits::default())
                .expect_err("not JSON"),
        );
        assert_eq!(problem, expected);
    }

    #[test]
    fn hostile_inputs_are_refused_without_panicking() {
        let long_key = "k".repeat(10_000);
        let inputs: Vec<(Option<String>, Vec<&str>, BodyRead)> = vec![
            (
                Some("Bearer \u{ff}\u{fe}".to_owned()),
                vec![KEY],
                complete(PAY_BODY),
            ),
            (Some(bearer(7)), vec![&long_key], complete(PAY_BODY)),
            (Some(bearer(7)), vec![KEY, KEY], complete(PAY_BODY)),
            (Some(bearer(7)), vec!["\"unterminated"], complete(PAY_BODY)),
            (
                Some(bearer(7)),
                vec![KEY],
                BodyRead::Complete(vec![0xff, 0xfe]),
            ),
            (Some(bearer(7)), vec![KEY], complete("null")),
            (Some(bearer(7)), vec![KEY], complete("[]")),
        ];
        for (authorization, keys, body) in inputs {
            let problem = rejected(check(
                &pay_route("b"),
                authorization.as_deref(),
                &keys,
                body,
            ));
            assert!((400..500).contains(&problem.status), "{problem:?}");
        }
    }
}
