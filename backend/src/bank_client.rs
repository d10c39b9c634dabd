//! [`BankClient`]: the backend's HTTP client for the partner bank (the bank simulator in
//! development and tests), with a timeout from configuration.
//!
//! A money-moving call has three outcomes, and the third is the one the article is about: the
//! bank moved the money ([`BankOutcome::Succeeded`]), refused ([`BankOutcome::Declined`], a final
//! business answer), or we cannot know ([`BankOutcome::Unknown`]: a timeout, a 5xx, a dropped
//! connection, an answer we cannot read). Unknown is never treated as failure: the key moves to
//! `unknown` and reconciliation asks the bank by reference ([`BankClient::look_up`]).

use std::time::Duration;

use serde::{Deserialize, Serialize};
use shared::Operation;

/// A client for the bank's HTTP API.
#[derive(Debug, Clone)]
pub struct BankClient {
    http: reqwest::Client,
    base_url: String,
}

/// The outcome of a debit or refund call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BankOutcome {
    /// The money moved.
    Succeeded,
    /// The bank refused; no money moved. Final.
    Declined {
        /// The bank's reason.
        reason: String,
    },
    /// No readable answer: the money may or may not have moved.
    Unknown {
        /// What went wrong, for the logs.
        reason: String,
    },
}

/// The bank's record of a reference, from a status look-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LookUp {
    /// The money moved under this reference.
    Succeeded,
    /// The bank refused this reference.
    Declined {
        /// The bank's reason.
        reason: String,
    },
    /// The bank never executed this reference: nothing moved.
    NeverSeen,
}

/// A status look-up that got no usable answer; try again later.
#[derive(Debug, thiserror::Error)]
#[error("bank look-up failed: {0}")]
pub struct LookUpError(String);

#[derive(Serialize)]
struct DebitCall<'a> {
    reference: &'a str,
    amount_paise: i64,
    account: &'a str,
}

#[derive(Serialize)]
struct RefundCall<'a> {
    reference: &'a str,
    debit_reference: &'a str,
    amount_paise: i64,
}

/// The body of every bank answer: a status word and, for refusals, a reason.
#[derive(Deserialize)]
struct BankAnswer {
    status: String,
    #[serde(default)]
    reason: Option<String>,
}

impl BankClient {
    /// A client for the bank at `base_url` (e.g. `http://127.0.0.1:8081`); every call gives up
    /// after `timeout`.
    pub fn new(base_url: &str, timeout: Duration) -> Result<BankClient, reqwest::Error> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .build()?;
        Ok(BankClient {
            http,
            base_url: base_url.trim_end_matches('/').to_owned(),
        })
    }

    /// Debits `account` under `reference`.
    #[tracing::instrument(skip(self))]
    pub async fn debit(&self, reference: &str, amount_paise: i64, account: &str) -> BankOutcome {
        let call = DebitCall {
            reference,
            amount_paise,
            account,
        };
        self.move_money("debits", &call).await
    }

    /// Refunds part of the debit `debit_reference` under `reference`.
    #[tracing::instrument(skip(self))]
    pub async fn refund(
        &self,
        reference: &str,
        debit_reference: &str,
        amount_paise: i64,
    ) -> BankOutcome {
        let call = RefundCall {
            reference,
            debit_reference,
            amount_paise,
        };
        self.move_money("refunds", &call).await
    }

    /// Asks the bank what became of `reference`.
    #[tracing::instrument(skip(self))]
    pub async fn look_up(
        &self,
        operation: Operation,
        reference: &str,
    ) -> Result<LookUp, LookUpError> {
        let url = format!("{}/{}/{reference}", self.base_url, collection(operation));
        let response = self
            .http
            .get(url)
            .send()
            .await
            .map_err(|error| LookUpError(error.to_string()))?;
        match response.status().as_u16() {
            404 => Ok(LookUp::NeverSeen),
            200 => {
                let answer: BankAnswer = response
                    .json()
                    .await
                    .map_err(|error| LookUpError(error.to_string()))?;
                match answer.status.as_str() {
                    "debited" | "refunded" => Ok(LookUp::Succeeded),
                    "declined" | "rejected" => Ok(LookUp::Declined {
                        reason: answer.reason.unwrap_or_else(|| answer.status.clone()),
                    }),
                    other => Err(LookUpError(format!("unexpected status {other:?}"))),
                }
            }
            status => Err(LookUpError(format!("HTTP {status}"))),
        }
    }

    async fn move_money(&self, collection: &str, call: &impl Serialize) -> BankOutcome {
        let url = format!("{}/{collection}", self.base_url);
        let response = match self.http.post(url).json(call).send().await {
            Ok(response) => response,
            Err(error) => return unknown(format!("no answer: {error}")),
        };
        let status = response.status().as_u16();
        let answer: BankAnswer = match response.json().await {
            Ok(answer) => answer,
            Err(error) => {
                return unknown(format!("HTTP {status} with an unreadable body: {error}"));
            }
        };
        match (status, answer.status.as_str()) {
            (201, "debited" | "refunded") => BankOutcome::Succeeded,
            (402 | 422, "declined" | "rejected") => BankOutcome::Declined {
                reason: answer.reason.unwrap_or(answer.status),
            },
            _ => unknown(format!("HTTP {status} with status {:?}", answer.status)),
        }
    }
}

fn collection(operation: Operation) -> &'static str {
    match operation {
        Operation::PayBill => "debits",
        Operation::RefundPayment => "refunds",
    }
}

fn unknown(reason: String) -> BankOutcome {
    BankOutcome::Unknown { reason }
}
