//! The simulated bank's callbacks (SPEC §7, "Bank callbacks"): once a debit or refund is
//! decided, its final status is posted to the PSP's callback URL, signed with the secret the two
//! share ([`bank_api::callback::sign`]), after `callback_delay_ms`, lost with
//! `callback_loss_rate`, sent `callback_duplicates` more times. Off until
//! [`crate::BankSimulator::send_callbacks_to`] (or the binary's `--callback-url` and
//! `--callback-secret`) says where and how to sign. A callback that fails is not retried: a
//! lost one is exactly what the knobs play.

use std::time::Duration;

use bank_api::callback::{CallbackBody, SIGNATURE_HEADER, sign};

/// Where callbacks go, and the secret they are signed with.
#[derive(Debug, Clone)]
pub(crate) struct CallbackTarget {
    /// The PSP's `…/bank/callbacks` URL.
    pub(crate) url: String,
    /// The shared secret.
    pub(crate) secret: Vec<u8>,
    /// The client they are sent with.
    pub(crate) http: reqwest::Client,
}

impl CallbackTarget {
    /// Sends `body` `times` times, `delay` from now, each signed when it leaves.
    pub(crate) async fn deliver(self, body: CallbackBody, times: u32, delay: Duration) {
        tokio::time::sleep(delay).await;
        let Ok(bytes) = serde_json::to_vec(&body) else {
            return;
        };
        for _ in 0..times {
            let now = time::OffsetDateTime::now_utc().unix_timestamp();
            let sent = self
                .http
                .post(&self.url)
                .header("content-type", "application/json")
                .header(SIGNATURE_HEADER, sign(&self.secret, now, &bytes))
                .body(bytes.clone())
                .send()
                .await;
            match sent {
                Ok(reply) => tracing::info!(
                    reference = body.reference,
                    status = reply.status().as_u16(),
                    "callback delivered"
                ),
                Err(error) => tracing::warn!(reference = body.reference, %error, "callback lost"),
            }
        }
    }
}
