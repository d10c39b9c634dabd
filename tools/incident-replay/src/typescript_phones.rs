//! Client (e): the TypeScript package (`clients/typescript/`) under Node, on the same night.
//!
//! One Node process runs every customer's phone (`clients/typescript/tools/replay-phones.ts`,
//! compiled by `npm run build:stack`): each customer arrives at their time on the night's clock,
//! which the process shares through the clock's wall-clock origin and scale, and pays with the
//! package's `PaymentsClient` (one key per action, saved before the first send, `Prefer: wait`
//! as (d)), on a clock compressed as the Rust phones' is. It prints, per customer, when each
//! attempt went out, the 409s it heard, what it showed and how long it took, and the replay
//! counts that like any other client's. The development secret goes to the process in its
//! environment, never on its command line.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Deserialize;
use serde_json::json;
use tokio::io::AsyncWriteExt;

use crate::phones::{Payer, PhoneResult, PhoneView, Phones};

/// One customer's result as the Node process prints it.
#[derive(Debug, Deserialize)]
struct NodeResult {
    index: usize,
    sent_at_ms: Vec<f64>,
    in_progress_409s: u32,
    view: String,
    took_ms: f64,
}

/// Pays every payer's bill with the TypeScript package: `payers` are (arrival on the night's
/// clock, payer); the results come back in the same order.
pub async fn pay_all(
    script: &Path,
    phones: &Phones,
    payers: &[(Duration, Payer)],
) -> anyhow::Result<Vec<PhoneResult>> {
    if !script.is_file() {
        bail!(
            "{} is missing: build it first (cd clients/typescript && npm ci && npm run \
             build:stack), or give --typescript-phones",
            script.display()
        );
    }
    let customers: Vec<_> = payers
        .iter()
        .map(|(arrival, payer)| {
            json!({
                "index": payer.index,
                "user": payer.user.to_string(),
                "bill": payer.bill,
                "vpa": payer.vpa,
                "amount_paise": payer.amount_paise,
                "arrival_ms": arrival.as_secs_f64() * 1000.0,
            })
        })
        .collect();
    let plan = json!({
        "api": phones.api,
        "origin_unix_ms": phones.clock.origin_unix_ms(),
        "real_ms_per_second": phones.clock.real(Duration::from_secs(1)).as_secs_f64() * 1000.0,
        "timeout_ms": phones.timeout.as_secs_f64() * 1000.0,
        "seed": phones.seed,
        "customers": customers,
    });
    let secret = String::from_utf8(phones.secret.clone()).context("the secret is not UTF-8")?;
    let mut node = tokio::process::Command::new("node")
        .arg(script)
        .env("AUTH_JWT_SECRET", secret)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .context("starting node (client (e) needs Node.js 20 or later)")?;
    let mut stdin = node.stdin.take().context("node's standard input")?;
    stdin.write_all(plan.to_string().as_bytes()).await?;
    drop(stdin);
    let output = node.wait_with_output().await.context("waiting for node")?;
    if !output.status.success() {
        bail!("client (e)'s Node process failed: {}", output.status);
    }
    let results: Vec<NodeResult> =
        serde_json::from_slice(&output.stdout).context("client (e)'s results are not JSON")?;
    payers
        .iter()
        .map(|(_, payer)| {
            let result = results
                .iter()
                .find(|result| result.index == payer.index)
                .with_context(|| format!("no result for customer {}", payer.index))?;
            phone_result(result)
        })
        .collect()
}

fn phone_result(result: &NodeResult) -> anyhow::Result<PhoneResult> {
    let night = |ms: f64| Duration::try_from_secs_f64(ms / 1000.0).unwrap_or_default();
    Ok(PhoneResult {
        sent_at: result.sent_at_ms.iter().map(|ms| night(*ms)).collect(),
        in_progress_409s: result.in_progress_409s,
        view: match result.view.as_str() {
            "paid" => PhoneView::Paid,
            "declined" => PhoneView::Declined,
            "refused" => PhoneView::Refused,
            "no_final_reply" => PhoneView::NoFinalReply,
            other => bail!("client (e) reported an unknown view {other:?}"),
        },
        took: night(result.took_ms),
    })
}
