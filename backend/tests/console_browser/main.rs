//! The operator console in a real browser (SPEC §8 "Operator console"): headless Chromium,
//! driven over WebDriver, uses `/admin/console` of a real backend (PostgreSQL, a bank simulator
//! over HTTP) as support staff would, for the three stories the console is for:
//! - a lost reply: the customer's retry got the saved reply, and the payment's
//!   trail reads claimed, bank replied, replayed;
//! - an unknown key: the bank debited but the backend had stopped waiting; from the queue the
//!   operator asks the bank, the key resolves, the payment reads succeeded, and the bank still
//!   holds exactly one debit for it;
//! - a double charge: a client that made a new key per retry paid one bill twice; the check
//!   says the ledger is not clean and names both references.
//!
//! Before that, neither the page nor the API lets in anyone without an operator token. The
//! three screens are saved as screenshots (`console-customer.png`, `console-queue.png`,
//! `console-check.png`) in `screenshots/` of the target folder, and also in
//! `$SCREENSHOTS_DIR` when set. Needs Chromium and chromedriver
//! (`scripts/setup-tools.sh` installs them).

#[path = "../support/mod.rs"]
#[macro_use]
// The support module re-exports helpers for the contract suite that this binary does not use.
#[allow(unused_imports)]
mod support;

use std::time::Duration;

use bank_simulator::Knobs;
use serde_json::{Value, json};

use crate::support::{Options, TestApp, new_key, payment_body};
use test_harness::browser::{Browser, ChromeDriver};

/// Customer A: one payment whose reply was lost, then retried with the same key.
const LOST_REPLY_CUSTOMER: u64 = 101;
/// Customer B: one payment whose key the backend left `unknown`.
const UNKNOWN_KEY_CUSTOMER: u64 = 102;
/// Customer C: one bill paid twice, under two keys.
const DOUBLE_CHARGE_CUSTOMER: u64 = 103;
/// The backend's bank timeout: a bank reply held back longer leaves the key `unknown`.
const BANK_TIMEOUT: Duration = Duration::from_millis(300);
/// How long the bank holds back customer B's reply: well past [`BANK_TIMEOUT`].
const HELD_REPLY_MS: u64 = 3_000;
/// The operator at the console.
const OPERATOR: &str = "asha";
/// What the operator types as the reason for asking the bank.
const ASK_REASON: &str = "customer 102 called: charged but the app says pending";
/// What the operator types as the reason for the check.
const CHECK_REASON: &str = "customer 103 sees two debits for one gas bill";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_trace_a_replay_resolve_an_unknown_key_and_find_a_double_charge() {
    let app = TestApp::spawn_with(Options {
        bank_timeout: BANK_TIMEOUT,
        ..Options::default()
    })
    .await;
    let app = &app;
    api_refuses_anyone_but_an_operator(app).await;
    pay_then_retry_with_the_same_key(app).await;
    let unknown = leave_a_key_unknown(app).await;
    let double_charge = pay_one_bill_twice(app).await;

    let driver = ChromeDriver::start().await;
    Browser::run(&driver, |browser| async move {
        let console = format!("{}/admin/console", app.admin_url);
        browser.goto(&console).await;
        page_refuses_anyone_but_an_operator(&browser).await;
        trace_the_replay(&browser).await;
        resolve_the_unknown_key(&browser, app, &unknown).await;
        find_the_double_charge(&browser, &console, &double_charge).await;
    })
    .await;
}

/// The static page is open to all; the API replies 401 without a token and 401 or 403 to a
/// customer's token, as problems; an operator's token is let in.
async fn api_refuses_anyone_but_an_operator(app: &TestApp) {
    let page = app
        .http
        .get(format!("{}/admin/console", app.admin_url))
        .send()
        .await
        .expect("the admin listener replies");
    assert_eq!(page.status(), 200, "the console page needs no token");
    assert!(content_type(&page).starts_with("text/html"));

    let queue = format!("{}/admin/api/queue", app.admin_url);
    let anonymous = app.http.get(&queue).send().await.expect("replies");
    assert_eq!(anonymous.status(), 401, "no token");
    assert!(content_type(&anonymous).starts_with("application/problem+json"));
    let customer = app
        .http
        .get(&queue)
        .bearer_auth(TestApp::token(LOST_REPLY_CUSTOMER))
        .send()
        .await
        .expect("replies");
    assert!(
        matches!(customer.status().as_u16(), 401 | 403),
        "a customer's token is no operator's: {}",
        customer.status()
    );
    let operator = app
        .http
        .get(&queue)
        .bearer_auth(TestApp::operator_token(OPERATOR))
        .send()
        .await
        .expect("replies");
    assert_eq!(operator.status(), 200, "an operator's token");
}

fn content_type(response: &reqwest::Response) -> &str {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .unwrap_or_default()
}

/// Customer A pays; the phone never sees the reply and sends the same request with the same
/// key again: the second reply is the first one, replayed.
async fn pay_then_retry_with_the_same_key(app: &TestApp) {
    let key = new_key();
    let body = payment_body(230_000);
    let first = app
        .pay(LOST_REPLY_CUSTOMER, Some(&key), "elec-1", &body)
        .await;
    assert_eq!(first.status, 201);
    let retry = app
        .pay(LOST_REPLY_CUSTOMER, Some(&key), "elec-1", &body)
        .await;
    assert_eq!(retry.status, 201);
    assert!(retry.is_replay(), "the retry gets the saved reply");
    assert_eq!(retry.bytes, first.bytes);
}

/// Customer B's key, and the bank reference of its payment.
struct UnknownKey {
    key: String,
    bank_reference: String,
}

/// Customer B pays while the bank holds its replies back past the backend's timeout: the bank
/// debits, the backend replies "outcome pending" and leaves the key `unknown` (no reconciler
/// runs in the test backend, so it stays so until the operator asks).
async fn leave_a_key_unknown(app: &TestApp) -> UnknownKey {
    app.bank.simulator.set_knobs(Knobs {
        lost_reply_rate: 1.0,
        lost_reply_delay_ms: HELD_REPLY_MS,
        ..Knobs::default()
    });
    let key = new_key();
    let pending = app
        .pay(
            UNKNOWN_KEY_CUSTOMER,
            Some(&key),
            "water-1",
            &payment_body(99_900),
        )
        .await;
    pending.assert_problem(503, "outcome-pending");
    app.bank.simulator.set_knobs(Knobs::default());
    assert_eq!(
        app.key_state(UNKNOWN_KEY_CUSTOMER, &key).await.as_deref(),
        Some("unknown")
    );
    let [bank_reference] = app
        .texts(&format!(
            "SELECT bank_reference FROM payments WHERE user_id = '{UNKNOWN_KEY_CUSTOMER}'"
        ))
        .await
        .try_into()
        .expect("one payment for customer B");
    assert_eq!(
        app.ledger().await.debits_for(&bank_reference).count(),
        1,
        "the bank did debit"
    );
    UnknownKey {
        key,
        bank_reference,
    }
}

/// Customer C pays one bill, and again with a new key (the broken client of the incident):
/// both succeed at the bank. Returns the two bank references.
async fn pay_one_bill_twice(app: &TestApp) -> [String; 2] {
    let body = payment_body(120_000);
    let mut references = Vec::new();
    for attempt in ["first", "second"] {
        let reply = app
            .pay(DOUBLE_CHARGE_CUSTOMER, Some(&new_key()), "gas-1", &body)
            .await;
        assert_eq!(reply.status, 201, "the {attempt} payment");
        let reference = reply.json()["bank_reference"]
            .as_str()
            .expect("a bank reference")
            .to_owned();
        references.push(reference);
    }
    let ledger = app.ledger().await;
    for reference in &references {
        assert_eq!(ledger.debits_for(reference).count(), 1, "{reference}");
    }
    references.try_into().expect("two payments")
}

/// Without a token the page asks for one; with a customer's token it says the token was
/// refused; with the operator's it shows the customer.
async fn page_refuses_anyone_but_an_operator(browser: &Browser) {
    browser
        .wait_for_script(
            "the page's script to start with no token",
            "return document.getElementById('token-status').dataset.state === 'unset' || null;",
            vec![],
        )
        .await;
    browser
        .type_into("#customer-id", &LOST_REPLY_CUSTOMER.to_string())
        .await;
    browser.click("#search").await;
    let asked = browser
        .wait_for_script(
            "the page to ask for the operator token",
            "const message = document.getElementById('customer-message');
             if (message.hidden || !message.classList.contains('error')) return null;
             return { text: message.textContent,
                      actions: document.querySelectorAll('article.action').length };",
            vec![],
        )
        .await;
    assert!(
        text_of(&asked["text"]).contains("operator token"),
        "{asked}"
    );
    assert_eq!(asked["actions"], 0, "nothing is shown without a token");

    browser
        .type_into("#token", &TestApp::token(LOST_REPLY_CUSTOMER))
        .await;
    browser.click("#use-token").await;
    let refused = browser
        .wait_for_script(
            "the page to say the customer's token was refused",
            "const status = document.getElementById('token-status');
             if (status.dataset.state !== 'refused') return null;
             return { status: status.textContent,
                      message: document.getElementById('customer-message').textContent,
                      actions: document.querySelectorAll('article.action').length };",
            vec![],
        )
        .await;
    assert!(
        text_of(&refused["message"]).contains("refused"),
        "{refused}"
    );
    assert_eq!(
        refused["actions"], 0,
        "nothing is shown to a customer's token"
    );

    browser
        .type_into("#token", &TestApp::operator_token(OPERATOR))
        .await;
    browser.click("#use-token").await;
    browser
        .wait_for_script(
            "the operator's token to be taken",
            "return document.getElementById('token-status').dataset.state === 'set' || null;",
            vec![],
        )
        .await;
}

/// Customer A's one payment, and its trail in order: claimed, bank replied, replayed.
async fn trace_the_replay(browser: &Browser) {
    browser
        .type_into("#customer-id", &LOST_REPLY_CUSTOMER.to_string())
        .await;
    browser.click("#search").await;
    let shown = browser
        .wait_for_script(
            "customer A's payment and its trail",
            "const actions = document.querySelectorAll('#customer-results article.action');
             if (actions.length === 0) return null;
             return { actions: actions.length,
                      status: actions[0].dataset.status,
                      trail: Array.from(actions[0].querySelectorAll('ol.timeline > li[data-event]'),
                                        item => item.dataset.event) };",
            vec![],
        )
        .await;
    assert_eq!(shown["actions"], 1, "{shown}");
    assert_eq!(shown["status"], "succeeded", "{shown}");
    assert_eq!(
        shown["trail"],
        json!(["claimed", "bank_answered", "replayed"]),
        "{shown}"
    );
    browser
        .screenshot("console-customer.png", "#customer-results article.action")
        .await;
}

/// In the queue, customer B's `unknown` key; the operator gives a reason and asks the bank; the
/// key resolves, the payment reads succeeded with the reason in its trail, and the bank holds
/// exactly one debit for it: asking looked the debit up, it did not send it again.
async fn resolve_the_unknown_key(browser: &Browser, app: &TestApp, unknown: &UnknownKey) {
    browser.click("#nav-queue").await;
    let row = format!("#queue-table tr[data-user-id=\"{UNKNOWN_KEY_CUSTOMER}\"]");
    let listed = browser
        .wait_for_script(
            "customer B's unknown key in the queue",
            "const row = document.querySelector(arguments[0] + '[data-state=\"unknown\"]');
             return row && row.dataset.key;",
            vec![json!(row)],
        )
        .await;
    assert_eq!(text_of(&listed).to_lowercase(), unknown.key.to_lowercase());

    browser
        .type_into(&format!("{row} input.reason"), ASK_REASON)
        .await;
    browser.click(&format!("{row} button.ask-bank")).await;
    let replied = browser
        .wait_for_script(
            "the bank's reply in customer B's row",
            "const cell = document.querySelector(arguments[0] + ' td.result');
             const result = cell && cell.dataset.result;
             if (!result || result === 'pending') return null;
             return { result: result, text: cell.textContent };",
            vec![json!(row)],
        )
        .await;
    assert_eq!(replied["result"], "resolved", "{replied}");
    browser
        .screenshot("console-queue.png", "#queue-results")
        .await;
    assert_eq!(
        app.ledger()
            .await
            .debits_for(&unknown.bank_reference)
            .count(),
        1,
        "asking the bank moved no more money"
    );

    browser.click(&format!("{row} button.customer-link")).await;
    let payment = browser
        .wait_for_script(
            "customer B's payment, finished",
            "const action = document.querySelector('#customer-results article.action');
             const reference = action && action.querySelector('.fact-reference');
             if (!reference || !reference.textContent.includes(arguments[0])
                 || action.dataset.status === 'pending') return null;
             return { status: action.dataset.status,
                      reasons: Array.from(document.querySelectorAll(
                        '#customer-results li[data-event] .event-reason'), item => item.textContent) };",
            vec![json!(unknown.bank_reference)],
        )
        .await;
    assert_eq!(payment["status"], "succeeded", "{payment}");
    assert!(
        payment["reasons"].as_array().is_some_and(|reasons| reasons
            .iter()
            .any(|reason| text_of(reason).contains(ASK_REASON))),
        "the operator's reason is in customer B's trail: {payment}"
    );
}

/// A `#check=C` link fills the form and sends nothing, nor does "Run the check" without a
/// reason; with one, the check says not clean: one double charge naming both references.
async fn find_the_double_charge(browser: &Browser, console: &str, references: &[String; 2]) {
    browser
        .goto(&format!("{console}#check={DOUBLE_CHARGE_CUSTOMER}"))
        .await;
    let filled = browser
        .wait_for_script(
            "the check form filled in from the link",
            "if (document.getElementById('check').hidden ||
                 document.getElementById('check-customer-id').value !== arguments[0]) return null;
             return { results: document.getElementById('check-results').childElementCount };",
            vec![json!(DOUBLE_CHARGE_CUSTOMER.to_string())],
        )
        .await;
    assert_eq!(filled["results"], 0, "the link alone runs no check");

    browser.click("#run-check").await;
    let refused = browser
        .wait_for_script(
            "the page to ask for a reason",
            "const message = document.getElementById('check-message');
             if (!message.classList.contains('error')) return null;
             return { text: message.textContent,
                      results: document.getElementById('check-results').childElementCount };",
            vec![],
        )
        .await;
    assert!(text_of(&refused["text"]).contains("reason"), "{refused}");
    assert_eq!(refused["results"], 0, "no check without a reason");

    browser.type_into("#check-reason", CHECK_REASON).await;
    browser.click("#run-check").await;
    let verdict = browser
        .wait_for_script(
            "the check's verdict",
            "const verdict = document.getElementById('check-verdict');
             if (!verdict) return null;
             return { clean: verdict.dataset.clean,
                      findings: Array.from(document.querySelectorAll('ul#findings > li[data-finding]'),
                                           item => ({ kind: item.dataset.finding, text: item.textContent })) };",
            vec![],
        )
        .await;
    assert_eq!(verdict["clean"], "false", "{verdict}");
    let findings = verdict["findings"].as_array().expect("a list of findings");
    assert_eq!(findings.len(), 1, "{verdict}");
    assert_eq!(findings[0]["kind"], "double_charge", "{verdict}");
    for reference in references {
        assert!(
            text_of(&findings[0]["text"]).contains(reference.as_str()),
            "the finding names {reference}: {verdict}"
        );
    }
    browser
        .screenshot("console-check.png", "#check-results")
        .await;
}

/// A JSON string's text; anything else reads as empty.
fn text_of(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}
