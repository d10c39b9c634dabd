//! The pay-a-bill page (`clients/typescript/web/`, the TypeScript package in a browser) in
//! headless Chromium, through the Worker under `workerd` in front of the backend on a fresh
//! PostgreSQL database and the bank simulator, served by the page's own server
//! (`web/serve.mjs`, which proxies the API to the edge). The bank is slow (4 s) and deduplicates
//! nothing; the page pays, is reloaded while the first attempt is still at the bank, resumes the
//! saved action from `localStorage` with the same key, and ends paid, with exactly one debit at
//! the bank's ledger. The screen is saved as `pay-page.png` (`target/screenshots/`, and
//! `$SCREENSHOTS_DIR` when set, as `SCREENSHOTS_DIR=docs/images` for the README's picture).
#![cfg(not(target_arch = "wasm32"))]

mod support;

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};
use support::{Stack, StackOptions};
use test_harness::browser::{Browser, ChromeDriver};
use test_harness::{ServerProcess, listening_url};

/// The user who pays.
const USER: u64 = 61;

fn web_dir() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../clients/typescript/web"
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_mid_payment_resumes_the_same_key_to_one_debit() {
    assert!(
        web_dir().join("dist/app.js").is_file(),
        "the page is not built: cd clients/typescript && npm ci && npm run build:web"
    );
    let stack = Stack::start(StackOptions::default()).await;
    stack
        .set_bank_knobs(json!({"latency_ms": 4000, "dedupe": false}))
        .await;
    let mut serve = Command::new("node");
    serve
        .arg(web_dir().join("serve.mjs"))
        .env("API_URL", &stack.edge_url)
        .env("LISTEN_ADDR", "127.0.0.1:0");
    let (_web, web_url) =
        ServerProcess::start("web", serve, |line| listening_url(line, "web")).await;
    let page = format!("{web_url}/#token={}&user={USER}", Stack::token(USER));

    let driver = ChromeDriver::start().await;
    Browser::run(&driver, |browser| async move {
        browser.goto(&page).await;
        browser
            .wait_for_script(
                "the Pay button, enabled",
                "return document.querySelector('#pay').disabled ? null : true;",
                vec![],
            )
            .await;
        browser.click("#pay").await;
        let key = browser
            .wait_for_script(
                "the first attempt on its way, and its key",
                "const key = document.querySelector('#action-key').textContent.trim();
                 const sent = document.querySelectorAll('#attempts li').length;
                 return key && sent > 0 ? key : null;",
                vec![],
            )
            .await;

        browser.reload().await;
        let resumed = browser
            .wait_for_script(
                "the resumed action paid",
                "const result = document.querySelector('#result');
                 const sent = document.querySelectorAll('#attempts li').length;
                 return result && result.dataset.kind === 'paid' && sent > 0
                   ? document.querySelector('#action-key').textContent.trim() : null;",
                vec![],
            )
            .await;
        assert_eq!(resumed, key, "the reload resumed the same key");
        browser.screenshot("pay-page.png", "#action-panel").await;
    })
    .await;

    let debits = stack.debits().await;
    assert_eq!(debits.len(), 1, "one debit: {debits:?}");
    let paid_for: Vec<&Value> = debits.iter().map(|debit| &debit["amount_paise"]).collect();
    assert_eq!(paid_for, [&json!(230000)]);
}
