//! A user action in flight: its key and its exact body, kept together for every retry.

use serde::{Deserialize, Serialize};

use crate::key::IdempotencyKey;
use crate::operation::Operation;

/// One user action (one tap on Pay). Serialisable so the client can save it to durable storage
/// *before* the first send: after a crash or restart it resumes with the same key and the
/// identical body, never a new key. A new `PendingAction` is made only for a new user action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PendingAction {
    /// Minted once, when the action starts.
    key: IdempotencyKey,
    /// What the action does.
    operation: Operation,
    /// The operation's path parameter (the bill or payment id).
    target: String,
    /// The body exactly as first serialised; retries send these bytes, never a re-encoding.
    body: String,
}

impl PendingAction {
    /// Starts a new user action: mints its key and freezes its body.
    pub fn start(operation: Operation, target: &str, body: &impl Serialize) -> PendingAction {
        PendingAction {
            key: IdempotencyKey::mint(),
            operation,
            target: target.to_owned(),
            body: serde_json::to_string(body).expect("request bodies always serialise"),
        }
    }

    /// The key every attempt of this action sends.
    pub fn key(&self) -> &IdempotencyKey {
        &self.key
    }

    /// The operation.
    pub fn operation(&self) -> Operation {
        self.operation
    }

    /// The path parameter.
    pub fn target(&self) -> &str {
        &self.target
    }

    /// The request path: the route template with the target filled in.
    pub fn path(&self) -> String {
        let name = match self.operation {
            Operation::PayBill => "{bill_id}",
            Operation::RefundPayment => "{payment_id}",
        };
        self.operation.route_template().replace(name, &self.target)
    }

    /// The exact body bytes to send.
    pub fn body(&self) -> &[u8] {
        self.body.as_bytes()
    }
}

#[cfg(test)]
mod tests {
    // Under wasm32 the same tests run through wasm-bindgen-test (see `.cargo/config.toml`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;
    use crate::operation::Operation;

    #[test]
    fn an_action_keeps_its_key_and_body_through_a_save_and_load() {
        let action = PendingAction::start(
            Operation::PayBill,
            "elec-1",
            &serde_json::json!({"payer_vpa": "asha@okbank", "amount_paise": 230000}),
        );
        let saved = serde_json::to_string(&action).expect("serialisable");
        let resumed: PendingAction = serde_json::from_str(&saved).expect("loads");
        assert_eq!(resumed, action);
        assert_eq!(resumed.body(), action.body());
        assert_eq!(resumed.path(), "/v1/bills/elec-1/pay");
    }

    #[test]
    fn each_new_action_gets_a_new_key() {
        let body = serde_json::json!({"amount_paise": 1});
        let first = PendingAction::start(Operation::RefundPayment, "p", &body);
        let second = PendingAction::start(Operation::RefundPayment, "p", &body);
        assert_ne!(first.key(), second.key());
        assert_eq!(first.path(), "/v1/payments/p/refunds");
    }
}
