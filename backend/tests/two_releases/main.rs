//! Two releases side by side, as a rolling upgrade runs them (docs/operations.md, "upgrades"):
//! the previous release's backend (`PREVIOUS_RELEASE_BACKEND`, built by
//! `scripts/two-releases.sh` from the commit `deploy/previous-release` names) migrates a fresh
//! database and takes payments; then this release's `backend migrate` runs as the release step
//! while the previous release keeps serving, and this release's backend starts beside it on the
//! same database and bank. From then on every request is sent to one release or the other, and
//! the rules hold across them: a payment made on one is replayed by the other byte for byte;
//! the same payment sent to both at once debits once (many rounds); a refund of a payment the
//! other release made, its replay on the other; a changed body refused by both; a key's status
//! alike on both; never a 5xx. The bank's ledger has one debit per payment key. Both read this
//! release's policy file, as replicas sharing a mounted one do: a field the previous release
//! does not know would stop it at start-up (policies refuse unknown fields).
//!
//! Run by `scripts/two-releases.sh` (the test command runs it); without the previous release's
//! binary this test fails, saying how to build it, rather than pass.

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};
use test_harness::{Received, ServerProcess, TestDatabase, listening_url, listening_urls};

/// The HS256 secret both releases check customers' tokens with.
const SECRET: &str = "two-releases-test-secret-of-32-bytes-or-more";
/// Rounds of one payment sent to both releases at once.
const ROUNDS: usize = 25;

/// One release's backend, serving.
struct Release {
    name: &'static str,
    url: String,
    _process: ServerProcess,
}

fn previous_release_binary() -> PathBuf {
    let path = std::env::var_os("PREVIOUS_RELEASE_BACKEND").map(PathBuf::from);
    match path {
        Some(path) if path.is_file() => path,
        _ => panic!(
            "PREVIOUS_RELEASE_BACKEND must name the previous release's backend binary: run \
             scripts/two-releases.sh, which builds it from deploy/previous-release"
        ),
    }
}

fn backend_command(binary: &PathBuf, database: &TestDatabase, bank_url: &str) -> Command {
    let mut command = Command::new(binary);
    command
        .env("DATABASE_URL", database.url())
        .env("BANK_URL", bank_url)
        .env("APP_ENV", "production")
        .env("DATABASE_REPLICATION", "none")
        .env("REQUIRE_EDGE_PROOF", "false")
        .env("AUTH_JWT_SECRET", SECRET)
        .env("POLICY_FILE", repo_root().join("policy.yaml"))
        .env("RUST_LOG", "warn");
    command
}

/// Runs `backend migrate` of `binary` to its end.
fn migrate(binary: &PathBuf, database: &TestDatabase) {
    let status = backend_command(binary, database, "http://127.0.0.1:9")
        .arg("migrate")
        .status()
        .expect("run backend migrate");
    assert!(status.success(), "{} migrate: {status}", binary.display());
}

async fn serve(
    name: &'static str,
    binary: &PathBuf,
    database: &TestDatabase,
    bank_url: &str,
) -> Release {
    let mut command = backend_command(binary, database, bank_url);
    command
        .env("LISTEN_ADDR", "127.0.0.1:0")
        .env("ADMIN_ADDR", "127.0.0.1:0")
        .env("MIGRATE_ON_START", "false");
    let ready = listening_urls(["backend admin", "backend"]);
    let (process, [_admin, url]) = ServerProcess::start(name, command, ready).await;
    Release {
        name,
        url,
        _process: process,
    }
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn token(user: &str) -> String {
    let exp = time::OffsetDateTime::now_utc().unix_timestamp() + 3600;
    shared::auth::sign_claims(&json!({ "sub": user, "exp": exp }), SECRET.as_bytes())
}

fn new_key() -> String {
    uuid::Uuid::new_v4().to_string()
}

fn payment(amount: u64) -> Value {
    json!({ "amount_paise": amount, "payer_vpa": "asha@okbank" })
}

/// Sends `body` (or nothing, for a `GET`) to `path` at `release` as `user` with `key`.
async fn send(
    release: &Release,
    user: &str,
    key: &str,
    path: &str,
    body: Option<&Value>,
) -> Received {
    let http = reqwest::Client::new();
    let url = format!("{}{path}", release.url);
    let request = match body {
        Some(body) => http
            .post(url)
            .header("content-type", "application/json")
            .body(body.to_string()),
        None => http.get(url),
    };
    let reply = request
        .bearer_auth(token(user))
        .header("Idempotency-Key", key)
        .send()
        .await
        .unwrap_or_else(|error| panic!("{} did not reply: {error}", release.name));
    let received = Received::from(reply).await;
    assert!(
        received.status < 500,
        "{} replied {} to {path}: {}",
        release.name,
        received.status,
        String::from_utf8_lossy(&received.bytes)
    );
    received
}

async fn pay(release: &Release, user: &str, key: &str, body: &Value) -> Received {
    send(release, user, key, "/v1/bills/elec-1/pay", Some(body)).await
}

async fn debits(bank_url: &str) -> usize {
    let ledger: Value = reqwest::get(format!("{bank_url}/ledger"))
        .await
        .expect("the ledger")
        .json()
        .await
        .expect("JSON");
    ledger["debits"].as_array().expect("debits").len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "run by scripts/two-releases.sh, which builds the previous release first"]
async fn the_previous_release_and_this_one_serve_one_database_side_by_side() {
    let previous_binary = previous_release_binary();
    let current_binary = test_harness::server_binary("backend");
    let mut bank_command = Command::new(test_harness::server_binary("bank-simulator"));
    bank_command.args(["--listen", "127.0.0.1:0"]);
    let (_bank, bank_url) = ServerProcess::start("bank-simulator", bank_command, |line| {
        listening_url(line, "bank simulator")
    })
    .await;
    let database = TestDatabase::create().await;

    // Before the upgrade: the previous release alone.
    migrate(&previous_binary, &database);
    let previous = serve("previous release", &previous_binary, &database, &bank_url).await;
    // A numeric subject, which releases before opaque subjects accept too (PREVIOUS_RELEASE).
    let user = "4242";
    let before_key = new_key();
    let before = pay(&previous, user, &before_key, &payment(1_000)).await;
    assert_eq!(before.status, 201);

    // The release step, while the previous release serves; then this release beside it.
    migrate(&current_binary, &database);
    let current = serve("this release", &current_binary, &database, &bank_url).await;
    let releases = [&previous, &current];

    for release in releases {
        let replay = pay(release, user, &before_key, &payment(1_000)).await;
        assert!(replay.is_replay(), "{}: {replay:?}", release.name);
        assert_eq!(replay.bytes, before.bytes, "{}", release.name);
    }

    for round in 0..ROUNDS {
        let key = new_key();
        let body = payment(2_000 + round as u64);
        let (on_previous, on_current) = tokio::join!(
            pay(&previous, user, &key, &body),
            pay(&current, user, &key, &body)
        );
        // The one that claimed pays; the other, meanwhile, is told to wait (409) or replays.
        let replies = [&on_previous, &on_current];
        let created: Vec<&Received> = replies
            .into_iter()
            .filter(|reply| reply.status == 201)
            .collect();
        assert!(
            !created.is_empty()
                && replies
                    .iter()
                    .all(|reply| [201, 409].contains(&reply.status)),
            "round {round}: {on_previous:?} {on_current:?}"
        );
        for release in releases {
            let again = pay(release, user, &key, &body).await;
            assert_eq!(again.status, 201, "round {round}, {}", release.name);
            assert!(again.is_replay());
            assert_eq!(again.bytes, created[0].bytes, "round {round}");
        }
    }

    // A refund on one release of a payment the other made, replayed by the other.
    let payment_id = before.json()["payment_id"]
        .as_str()
        .expect("a payment id")
        .to_owned();
    let refunds = format!("/v1/payments/{payment_id}/refunds");
    let refund_key = new_key();
    let refund = json!({ "amount_paise": 400 });
    let refunded = send(&current, user, &refund_key, &refunds, Some(&refund)).await;
    assert_eq!(refunded.status, 201, "{refunded:?}");
    let refund_replay = send(&previous, user, &refund_key, &refunds, Some(&refund)).await;
    assert!(refund_replay.is_replay());
    assert_eq!(refund_replay.bytes, refunded.bytes);

    let status_path = format!("/v1/idempotency-keys/{before_key}");
    let mut statuses = Vec::new();
    for release in releases {
        let changed = pay(release, user, &before_key, &payment(1_001)).await;
        changed.assert_problem(422, "idempotency-key-reused");
        let status = send(release, user, &before_key, &status_path, None).await;
        assert_eq!(status.status, 200, "{}: {status:?}", release.name);
        assert_eq!(status.json()["state"], "done", "{}", release.name);
        statuses.push(status.bytes);
    }
    assert_eq!(statuses[0], statuses[1], "both releases read the key alike");

    assert_eq!(
        debits(&bank_url).await,
        1 + ROUNDS,
        "one debit per payment key"
    );
}
