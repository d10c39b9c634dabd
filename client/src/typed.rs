//! The typed way in: [`PaymentsClient::pay_bill`] and [`PaymentsClient::refund`] check the
//! request, start the action (its key minted and saved before anything is sent), run it to its
//! end, and give back the payment or refund, or a [`PaymentError`] that says what happened and
//! what the app should do. `begin` and `run` stay for callers that need the steps apart.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use std::time::Duration;
//! use payments_client::{
//!     ClientRules, HttpTransport, MemoryStore, PaymentError, PaymentsClient, RetrySchedule,
//!     Unsettled,
//! };
//! use shared::{UserId, api::Paise};
//!
//! // Nothing listens on port 9: every attempt fails, the (short) deadline passes, the key's
//! // status cannot be asked either, and the payment is kept to be asked about later.
//! let transport = HttpTransport::new(reqwest::Client::new(), "http://127.0.0.1:9", "a-token");
//! let rules = ClientRules {
//!     schedule: RetrySchedule { deadline: Duration::from_millis(300), ..RetrySchedule::default() },
//!     status_look_ups: 1,
//!     ..ClientRules::default()
//! };
//! let user = UserId::numbered(42);
//! let phone = PaymentsClient::new(user, transport, MemoryStore::default(), rules);
//! let amount = Paise::new(230_000).expect("Rs 2,300");
//! match phone.pay_bill("elec-2026-12", amount, "asha@okbank", &|_| {}).await {
//!     Ok(payment) => println!("paid under {}", payment.bank_reference),
//!     Err(PaymentError::Pending { key, why, .. }) => {
//!         assert_eq!(why, Unsettled::Unreachable);
//!         // Show a status screen; `resume_all` later asks about `key`, never pays again.
//!         assert_eq!(phone.pending().await.expect("listed")[0].key(), &key);
//!     }
//!     Err(other) => panic!("{other}"),
//! }
//! # }
//! ```

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use shared::api::{Paise, PayBillRequest, PaymentResponse, RefundRequest, RefundResponse};
use shared::{IdempotencyKey, Operation, Problem};
use thiserror::Error;

use crate::action_result::{ActionResult, Completion, FinalReply, KnownBy, Unsettled};
use crate::action_store::StoreError;
use crate::clock::Clock;
use crate::events::Report;
use crate::jitter::Jitter;
use crate::payments_client::PaymentsClient;
use crate::transport::Transport;

/// Why a payment or refund did not end in a receipt, and what the app should do.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum PaymentError {
    /// The request was refused before anything was saved or sent (a bad bill id or payer
    /// address): fix it and start again.
    #[error("not sent: {}", .0.detail.as_deref().unwrap_or(&.0.title))]
    Invalid(Problem),
    /// The action could not be saved, so nothing was sent: nothing can have been charged.
    #[error("not sent, the action could not be saved: {0}")]
    NotSaved(StoreError),
    /// The bank declined (402): a final business outcome, nothing was charged.
    #[error("declined by the bank: {}", .problem.title)]
    Declined {
        /// The action's key.
        key: IdempotencyKey,
        /// The decline.
        problem: Box<Problem>,
    },
    /// Another final reply (400, 404, 422…): the same request would be refused again.
    #[error("refused with {status}")]
    Refused {
        /// The action's key.
        key: IdempotencyKey,
        /// The status.
        status: u16,
        /// The problem, when the body was one.
        problem: Option<Box<Problem>>,
    },
    /// Not settled yet: the action stays saved. Show a status screen and resume later; never pay
    /// again in the meantime.
    #[error("not settled yet ({why:?}); ask again later about key {key}")]
    Pending {
        /// The key to ask about.
        key: IdempotencyKey,
        /// Why it is not settled.
        why: Unsettled,
        /// When the server expects to know, as its last reply said.
        known_by: Option<KnownBy>,
    },
    /// The token was refused: sign in again and resume the action (it stays saved).
    #[error("the token was refused; sign in again and resume key {key}")]
    SignInRequired {
        /// The action's key.
        key: IdempotencyKey,
    },
    /// The server has no record of the action: nothing was charged. Paying after all is a new
    /// action.
    #[error("the server never received key {key}; nothing was charged")]
    NotReceived {
        /// The action's key.
        key: IdempotencyKey,
    },
    /// A 2xx whose body is not the payment or refund (a proxy in between): the action is over;
    /// check the payments list before paying again.
    #[error("replied {status}, but not with the receipt")]
    Unreadable {
        /// The action's key.
        key: IdempotencyKey,
        /// The status.
        status: u16,
        /// The body as it came.
        body: Value,
    },
}

impl<T: Transport, C: Clock, J: Jitter> PaymentsClient<T, C, J> {
    /// Pays bill `bill_id` from `payer_vpa`: one new action with one new key, run to its end.
    pub async fn pay_bill(
        &self,
        bill_id: &str,
        amount: Paise,
        payer_vpa: &str,
        report: &Report,
    ) -> Result<PaymentResponse, PaymentError> {
        shared::api::check_bill_id(bill_id).map_err(PaymentError::Invalid)?;
        let body = serde_json::json!({"amount_paise": amount, "payer_vpa": payer_vpa});
        let body = PayBillRequest::from_json(&body).map_err(PaymentError::Invalid)?;
        self.perform(Operation::PayBill, bill_id, &body, report)
            .await
    }

    /// Refunds `amount` of payment `payment_id`: one new action with one new key, run to its end.
    pub async fn refund(
        &self,
        payment_id: &str,
        amount: Paise,
        report: &Report,
    ) -> Result<RefundResponse, PaymentError> {
        let body = RefundRequest {
            amount_paise: amount,
        };
        self.perform(Operation::RefundPayment, payment_id, &body, report)
            .await
    }

    async fn perform<R: DeserializeOwned>(
        &self,
        operation: Operation,
        target: &str,
        body: &impl Serialize,
        report: &Report,
    ) -> Result<R, PaymentError> {
        let saved = self
            .begin(operation, target, body)
            .await
            .map_err(PaymentError::NotSaved)?;
        self.run(&saved, report).await.into_receipt()
    }
}

impl Completion {
    /// The receipt this completion carries (a [`PaymentResponse`] or a [`RefundResponse`]), or
    /// why there is none: for a resumed action, what `pay_bill` and `refund` give.
    pub fn into_receipt<R: DeserializeOwned>(self) -> Result<R, PaymentError> {
        let (key, known_by) = (self.key, self.known_by);
        match self.result {
            ActionResult::Replied(reply) => replied(key, reply),
            ActionResult::Unsettled(why) => Err(PaymentError::Pending { key, why, known_by }),
            ActionResult::NotReceived => Err(PaymentError::NotReceived { key }),
            ActionResult::SignInRequired => Err(PaymentError::SignInRequired { key }),
        }
    }
}

fn replied<R: DeserializeOwned>(key: IdempotencyKey, reply: FinalReply) -> Result<R, PaymentError> {
    let status = reply.status;
    let problem = || {
        serde_json::from_value::<Problem>(reply.body.clone())
            .ok()
            .map(Box::new)
    };
    match status {
        200..=299 => {
            serde_json::from_value(reply.body.clone()).map_err(|_| PaymentError::Unreadable {
                key,
                status,
                body: reply.body,
            })
        }
        402 => match problem() {
            Some(problem) => Err(PaymentError::Declined { key, problem }),
            None => Err(PaymentError::Refused {
                key,
                status,
                problem: None,
            }),
        },
        _ => Err(PaymentError::Refused {
            key,
            status,
            problem: problem(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;
    use shared::retry::ClientRules;

    use super::*;
    use crate::action_store::{ActionStore, MemoryStore, SavedAction};
    use crate::test_support::{FakeClock, ScriptedTransport, Step, user};
    use crate::transport::Reply;

    fn reply(status: u16, body: Value) -> Step {
        Step::Reply(Reply {
            status,
            retry_after: None,
            replayed: false,
            wait_applied: None,
            body,
        })
    }

    const PAYMENT: &str = "3f8c1f9e-2a54-4b71-9d0e-6f2d8c7b1a30";

    fn payment_body() -> Value {
        json!({"payment_id": PAYMENT, "bill_id": "elec-1", "amount_paise": 230000,
               "status": "succeeded", "bank_reference": format!("pay-{PAYMENT}")})
    }

    fn client_replying(
        steps: impl IntoIterator<Item = Step>,
        store: impl ActionStore,
    ) -> (
        PaymentsClient<Arc<ScriptedTransport>, Arc<FakeClock>>,
        Arc<ScriptedTransport>,
    ) {
        let transport = Arc::new(ScriptedTransport::replying(steps));
        let client = PaymentsClient::new(
            user(7),
            Arc::clone(&transport),
            store,
            ClientRules::default(),
        )
        .with_clock(Arc::new(FakeClock::default()));
        (client, transport)
    }

    fn rupees(paise: u64) -> Paise {
        Paise::new(paise).expect("in range")
    }

    #[tokio::test]
    async fn a_payment_comes_back_typed_after_retries() {
        let (phone, transport) = client_replying(
            [Step::NoReply, Step::status(503), reply(201, payment_body())],
            MemoryStore::default(),
        );
        let payment = phone
            .pay_bill("elec-1", rupees(230_000), "asha@okbank", &|_| {})
            .await
            .expect("paid");
        assert_eq!(payment.bank_reference, format!("pay-{PAYMENT}"));
        assert_eq!(payment.amount_paise.get(), 230_000);
        assert_eq!(transport.sent().len(), 3);
        assert!(phone.pending().await.expect("lists").is_empty());
    }

    #[tokio::test]
    async fn a_decline_and_a_refusal_are_typed_errors_with_their_problem() {
        let decline = json!({"type": "/problems/payment-declined", "title": "Payment declined",
                             "status": 402});
        let (phone, _) = client_replying([reply(402, decline)], MemoryStore::default());
        let declined = phone
            .pay_bill("elec-1", rupees(1), "asha@okbank", &|_| {})
            .await;
        assert!(
            matches!(&declined, Err(PaymentError::Declined { problem, .. })
                if problem.type_uri == "/problems/payment-declined"),
            "{declined:?}"
        );

        let too_much = json!({"type": "/problems/refund-exceeds-payment", "title": "Too much",
                              "status": 422});
        let (phone, _) = client_replying([reply(422, too_much)], MemoryStore::default());
        let refused = phone.refund(PAYMENT, rupees(999_999), &|_| {}).await;
        assert!(
            matches!(&refused, Err(PaymentError::Refused { status: 422, problem: Some(p), .. })
                if p.type_uri == "/problems/refund-exceeds-payment"),
            "{refused:?}"
        );
    }

    #[tokio::test]
    async fn a_2xx_that_is_not_a_receipt_is_unreadable_not_a_payment() {
        let (phone, _) = client_replying(
            [reply(200, json!("<html>captive portal</html>"))],
            MemoryStore::default(),
        );
        let result = phone
            .pay_bill("elec-1", rupees(1), "asha@okbank", &|_| {})
            .await;
        assert!(
            matches!(result, Err(PaymentError::Unreadable { status: 200, .. })),
            "{result:?}"
        );
    }

    #[tokio::test]
    async fn a_bad_request_is_refused_before_anything_is_saved_or_sent() {
        let store = Arc::new(MemoryStore::default());
        let (phone, transport) = client_replying([], SharedStore(Arc::clone(&store)));
        for (bill, vpa) in [("", "asha@okbank"), ("elec-1", "not an address")] {
            let result = phone.pay_bill(bill, rupees(1), vpa, &|_| {}).await;
            assert!(
                matches!(result, Err(PaymentError::Invalid(_))),
                "{bill:?} {vpa:?}: {result:?}"
            );
        }
        assert!(store.load_all().expect("lists").is_empty());
        assert!(transport.sent().is_empty());
    }

    #[tokio::test]
    async fn an_action_that_cannot_be_saved_is_not_sent() {
        let (phone, transport) = client_replying([reply(201, payment_body())], BrokenStore);
        let result = phone
            .pay_bill("elec-1", rupees(1), "asha@okbank", &|_| {})
            .await;
        assert!(
            matches!(result, Err(PaymentError::NotSaved(_))),
            "{result:?}"
        );
        assert!(transport.sent().is_empty(), "nothing may be sent unsaved");
    }

    /// A store the test can look into after handing it to the client.
    #[derive(Debug)]
    struct SharedStore(Arc<MemoryStore>);

    impl ActionStore for SharedStore {
        fn save(&self, saved: &SavedAction) -> Result<(), StoreError> {
            self.0.save(saved)
        }
        fn load_all(&self) -> Result<Vec<SavedAction>, StoreError> {
            self.0.load_all()
        }
        fn forget(&self, key: &IdempotencyKey) -> Result<(), StoreError> {
            self.0.forget(key)
        }
    }

    /// A store whose disk is full.
    #[derive(Debug)]
    struct BrokenStore;

    impl ActionStore for BrokenStore {
        fn save(&self, _: &SavedAction) -> Result<(), StoreError> {
            Err(StoreError::Other("no space left on device".to_owned()))
        }
        fn load_all(&self) -> Result<Vec<SavedAction>, StoreError> {
            Ok(Vec::new())
        }
        fn forget(&self, _: &IdempotencyKey) -> Result<(), StoreError> {
            Ok(())
        }
    }
}
