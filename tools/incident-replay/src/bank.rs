//! The bank simulator as the replay drives and reads it: its knobs over `PUT /knobs` (the
//! latency ramp, lost replies, declines, 500s before debiting, dedupe on) and its ledger over
//! `GET /ledger`, where every executed debit is one entry, so a double debit is two entries for
//! one account. Both are the `bank-api` crate's types, the ones the simulator itself reads and
//! writes.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context;
use bank_api::{Knobs, Ledger, LedgerEntry};

use crate::night::NightSettings;

/// A bank simulator at a base URL.
#[derive(Debug, Clone)]
pub struct Bank {
    http: reqwest::Client,
    url: String,
}

impl Bank {
    /// The bank at `url`.
    pub fn new(http: reqwest::Client, url: &str) -> Bank {
        Bank {
            http,
            url: url.trim_end_matches('/').to_owned(),
        }
    }

    /// Sets the knobs for one step of the night; `real` converts the night's time to real time.
    /// Every step re-seeds the bank's generator from the night's seed and the step.
    pub async fn set_knobs(
        &self,
        night: &NightSettings,
        latency: Duration,
        step: u32,
        real: impl Fn(Duration) -> Duration,
    ) -> anyhow::Result<()> {
        let millis =
            |night_time: Duration| u64::try_from(real(night_time).as_millis()).unwrap_or(u64::MAX);
        let rail = self.rail().await?;
        self.put_knobs(&Knobs {
            latency_ms: millis(latency),
            jitter_ms: millis(night.jitter),
            decline_rate: night.decline_rate,
            error_rate: night.error_rate,
            lost_reply_rate: night.lost_reply_rate,
            lost_reply_delay_ms: millis(night.lost_reply_delay),
            dedupe: true,
            seed: night.seed.wrapping_mul(1_000).wrapping_add(u64::from(step)),
            ..rail
        })
        .await
    }

    /// Puts the bank back to fast and reliable (its rail rules as they were).
    pub async fn calm(&self) -> anyhow::Result<()> {
        let rail = self.rail().await?;
        self.put_knobs(&rail).await
    }

    /// Default knobs with the bank's current rail rules (status checks refused, `pending`
    /// replies), which the night's steps keep: the bank was started with them.
    async fn rail(&self) -> anyhow::Result<Knobs> {
        let current: Knobs = self
            .http
            .get(format!("{}/knobs", self.url))
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .with_context(|| format!("reading the bank's knobs at {}", self.url))?
            .json()
            .await
            .context("the bank's knobs")?;
        Ok(Knobs {
            pending_ms: current.pending_ms,
            status_check_first_after_ms: current.status_check_first_after_ms,
            status_checks_at_most: current.status_checks_at_most,
            ..Knobs::default()
        })
    }

    async fn put_knobs(&self, knobs: &Knobs) -> anyhow::Result<()> {
        self.http
            .put(format!("{}/knobs", self.url))
            .json(knobs)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .with_context(|| format!("setting the bank's knobs at {}", self.url))?;
        Ok(())
    }

    /// The executed debits of each of `accounts`, by account, in the ledger's order.
    pub async fn debits_of(
        &self,
        accounts: &[String],
    ) -> anyhow::Result<BTreeMap<String, Vec<LedgerEntry>>> {
        let ledger: Ledger = self
            .http
            .get(format!("{}/ledger", self.url))
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .with_context(|| format!("reading the bank's ledger at {}", self.url))?
            .json()
            .await
            .context("the bank's ledger is not the expected JSON")?;
        let mut by_account: BTreeMap<String, Vec<LedgerEntry>> = accounts
            .iter()
            .map(|account| (account.clone(), Vec::new()))
            .collect();
        for debit in ledger.debits {
            if let Some(debits) = by_account.get_mut(&debit.account) {
                debits.push(debit);
            }
        }
        Ok(by_account)
    }
}
