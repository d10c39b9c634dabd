//! Start-up refuses what SPEC §3 and §7 say it must: the development JWT secret outside
//! development mode, an invalid policy file (with a message naming the field), timings that
//! could release a claim whose bank call is still on its way, and a token leeway over its bound
//! (naming the setting); the configured token issuer and audience reach the server; and the
//! token secret comes from the environment or a mounted file, never from a flag; and production
//! refuses plaintext to a bank or database on another machine. Runs the
//! real `backend` binary; `dev-token` is the cheapest command that needs a full configuration.

use std::process::{Command, Output};

use test_harness::{ServerProcess, listening_urls};

const POLICY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../policy.yaml");
const REAL_SECRET: &str = "a-real-secret-for-this-test-only-0123456789";

fn backend(env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_backend"));
    command
        .arg("dev-token")
        .env_remove("AUTH_JWT_SECRET")
        .env_remove("DATABASE_URL")
        .env_remove("BANK_URL")
        .env_remove("APP_ENV")
        .env_remove("EDGE_PROOF_SECRET")
        // Its own test below; elsewhere a production without the edge's proof.
        .env("REQUIRE_EDGE_PROOF", "false")
        .env("POLICY_FILE", POLICY);
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("the backend binary runs")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The command failed and its error output says `reason`.
#[track_caller]
fn assert_refused(output: &Output, reason: &str) {
    assert!(
        !output.status.success(),
        "started anyway, looking for {reason:?}"
    );
    assert!(stderr(output).contains(reason), "{}", stderr(output));
}

#[test]
fn production_refuses_the_development_secret() {
    let refused = backend(&[]);
    assert_refused(&refused, "AUTH_JWT_SECRET is the development default");

    let development = backend(&[("APP_ENV", "development")]);
    assert!(development.status.success(), "{}", stderr(&development));

    let production = backend(&[("AUTH_JWT_SECRET", REAL_SECRET)]);
    assert!(production.status.success(), "{}", stderr(&production));
    let token = String::from_utf8_lossy(&production.stdout);
    assert_eq!(token.trim().split('.').count(), 3, "a JWT: {token}");
}

#[test]
fn the_operator_secret_is_the_operators_own_and_production_without_it_closes_the_console() {
    let production = [("AUTH_JWT_SECRET", REAL_SECRET)];
    let operator_token = |extra: &[(&str, &str)]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_backend"));
        command
            .arg("dev-operator-token")
            .env_remove("OPERATOR_JWT_SECRET")
            .env_remove("APP_ENV")
            .env("REQUIRE_EDGE_PROOF", "false")
            .env("POLICY_FILE", POLICY)
            .envs(production)
            .envs(extra.iter().copied());
        command.output().expect("the backend binary runs")
    };
    assert_refused(
        &operator_token(&[]),
        "no operator secret is configured (OPERATOR_JWT_SECRET",
    );
    assert_refused(
        &operator_token(&[("OPERATOR_JWT_SECRET", REAL_SECRET)]),
        "OPERATOR_JWT_SECRET must differ from AUTH_JWT_SECRET",
    );
    assert_refused(
        &operator_token(&[(
            "OPERATOR_JWT_SECRET",
            "development-only-operator-secret-never-use-in-production",
        )]),
        "OPERATOR_JWT_SECRET is the development default",
    );
    let own = operator_token(&[("OPERATOR_JWT_SECRET", "the-operators-own-secret-0123456789")]);
    assert!(own.status.success(), "{}", stderr(&own));
    // Production without an operator secret starts: only the console is closed.
    assert!(backend(&production).status.success());
}

#[test]
fn a_short_secret_is_refused() {
    let refused = backend(&[("AUTH_JWT_SECRET", "short")]);
    assert_refused(&refused, "at least 32 bytes");
}

#[test]
fn an_invalid_policy_file_stops_start_up_naming_the_field() {
    let dir = std::env::temp_dir().join(format!("policy-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let shipped = std::fs::read_to_string(POLICY).expect("read policy.yaml");
    for (field, bad_line) in [
        ("keep_keys_for_hours", "  keep_keys_for_hours: 0"),
        ("required_for", "  required_for: [pay_bill, wire_transfer]"),
        ("key_format", "  key_format: ulid"),
    ] {
        let broken: String = shipped
            .lines()
            .map(|line| {
                if line.trim_start().starts_with(&format!("{field}:")) {
                    bad_line.to_owned()
                } else {
                    line.to_owned()
                }
            })
            .collect::<Vec<_>>()
            .join("\n");
        let path = dir.join(format!("{field}.yaml"));
        std::fs::write(&path, broken).expect("write policy");
        let refused = backend(&[
            ("AUTH_JWT_SECRET", REAL_SECRET),
            ("POLICY_FILE", path.to_str().expect("utf-8 path")),
        ]);
        assert_refused(&refused, field);
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn timings_that_could_release_a_call_still_on_its_way_are_refused_naming_the_setting() {
    // The shipped policy's stuck_after is 5 minutes (300,000 ms).
    for (setting, value) in [
        ("BANK_TIMEOUT_MS", "300000"),
        ("BANK_TIMEOUT_MS", "900000"),
        ("BANK_TIMEOUT_MS", "0"),
        ("RECONCILE_INTERVAL_MS", "0"),
        ("JANITOR_INTERVAL_SECONDS", "0"),
        ("REQUEST_TIMEOUT_MS", "0"),
        ("REQUEST_TIMEOUT_MS", "5000"),
        ("BODY_READ_TIMEOUT_MS", "0"),
        ("MAX_CONCURRENT_REQUESTS", "0"),
        ("MAX_BANK_CALLS", "0"),
        ("BANK_QUEUE_WAIT_MS", "0"),
    ] {
        let refused = backend(&[("AUTH_JWT_SECRET", REAL_SECRET), (setting, value)]);
        assert!(
            !refused.status.success(),
            "{setting}={value}: started anyway"
        );
        assert!(
            stderr(&refused).contains(setting),
            "{setting}={value}: {}",
            stderr(&refused)
        );
    }
    let just_under = backend(&[
        ("AUTH_JWT_SECRET", REAL_SECRET),
        ("BANK_TIMEOUT_MS", "299999"),
        ("REQUEST_TIMEOUT_MS", "300000"),
    ]);
    assert!(just_under.status.success(), "{}", stderr(&just_under));
}

#[test]
fn a_leeway_over_five_minutes_is_refused_naming_the_setting() {
    let refused = backend(&[
        ("AUTH_JWT_SECRET", REAL_SECRET),
        ("AUTH_JWT_LEEWAY_SECONDS", "301"),
    ]);
    assert_refused(&refused, "AUTH_JWT_LEEWAY_SECONDS");
    let at_most = backend(&[
        ("AUTH_JWT_SECRET", REAL_SECRET),
        ("AUTH_JWT_LEEWAY_SECONDS", "300"),
    ]);
    assert!(at_most.status.success(), "{}", stderr(&at_most));
}

/// Serves a backend with `settings` on an embedded SQLite file in `data` and replies to the
/// status of an authenticated read with `token` (404: authenticated, no such payment; 401: not).
async fn status_of_a_read_with(
    settings: &[(&str, &str)],
    data: &std::path::Path,
    tokens: Vec<String>,
) -> Vec<u16> {
    let mut command = Command::new(env!("CARGO_BIN_EXE_backend"));
    command
        .arg("serve")
        .env_remove("APP_ENV")
        .env_remove("AUTH_JWT_SECRET")
        .env("POLICY_FILE", POLICY)
        .env("LISTEN_ADDR", "127.0.0.1:0")
        .env("ADMIN_ADDR", "127.0.0.1:0")
        .env(
            "DATABASE_URL",
            format!("sqlite://{}", data.join("p.sqlite").display()),
        )
        .env("DATABASE_REPLICATION", "none")
        .env("REQUIRE_EDGE_PROOF", "false")
        .env("RUST_LOG", "warn");
    for (name, value) in settings {
        command.env(name, value);
    }
    let (_server, [base]) =
        ServerProcess::start("backend", command, listening_urls(["backend"])).await;
    let http = reqwest::Client::new();
    let mut statuses = Vec::new();
    for token in tokens {
        let reply = http
            .get(format!(
                "{base}/v1/payments/8e03978e-40d5-43e8-bc93-6894a57f9324"
            ))
            .bearer_auth(token)
            .send()
            .await
            .expect("replies");
        statuses.push(reply.status().as_u16());
    }
    statuses
}

fn minted_token(output: &Output) -> String {
    assert!(output.status.success(), "{}", stderr(output));
    String::from_utf8_lossy(&output.stdout).trim().to_owned()
}

#[tokio::test]
async fn a_configured_issuer_and_audience_are_required_of_every_token() {
    let rules = [
        ("AUTH_JWT_SECRET", REAL_SECRET),
        ("AUTH_JWT_ISSUER", "https://id.example"),
        ("AUTH_JWT_AUDIENCE", "payments"),
    ];
    // dev-token mints with what the configuration requires; without it, a token lacks both.
    let token = minted_token(&backend(&rules));
    let without_them = minted_token(&backend(&[("AUTH_JWT_SECRET", REAL_SECRET)]));

    let data = tempfile::tempdir().expect("a temporary directory");
    let statuses = status_of_a_read_with(&rules, data.path(), vec![token, without_them]).await;
    assert_eq!(statuses, [404, 401], "accepted with them, refused without");
}

/// A secret file as a deployment mounts one: written by `echo`, so with a trailing line break.
fn secret_file(directory: &std::path::Path, contents: &str) -> String {
    let path = directory.join("jwt-secret");
    std::fs::write(&path, contents).expect("writing the secret file");
    path.to_string_lossy().into_owned()
}

#[tokio::test]
async fn the_secret_is_read_from_a_mounted_file() {
    let data = tempfile::tempdir().expect("a temporary directory");
    let file = secret_file(data.path(), &format!("{REAL_SECRET}\n"));
    let from_file = [("AUTH_JWT_SECRET_FILE", file.as_str())];
    // A token minted with the file's secret, one minted with the same secret from the
    // environment, and one with another secret: the served backend holds the file's secret.
    let minted_from_file = minted_token(&backend(&from_file));
    let minted_from_env = minted_token(&backend(&[("AUTH_JWT_SECRET", REAL_SECRET)]));
    let other = minted_token(&backend(&[(
        "AUTH_JWT_SECRET",
        "another-secret-of-at-least-32-bytes-long",
    )]));
    let statuses = status_of_a_read_with(
        &from_file,
        data.path(),
        vec![minted_from_file, minted_from_env, other],
    )
    .await;
    assert_eq!(statuses, [404, 404, 401]);
}

#[test]
fn a_secret_file_holding_the_development_secret_is_refused_like_the_variable() {
    let data = tempfile::tempdir().expect("a temporary directory");
    let file = secret_file(
        data.path(),
        &format!("{}\n", shared::auth::DEVELOPMENT_JWT_SECRET),
    );
    let refused = backend(&[("AUTH_JWT_SECRET_FILE", &file)]);
    assert_refused(&refused, "development default");
}

#[test]
fn both_the_secret_and_its_file_set_is_refused() {
    let data = tempfile::tempdir().expect("a temporary directory");
    let file = secret_file(data.path(), REAL_SECRET);
    let refused = backend(&[
        ("AUTH_JWT_SECRET", REAL_SECRET),
        ("AUTH_JWT_SECRET_FILE", &file),
    ]);
    assert_refused(
        &refused,
        "set AUTH_JWT_SECRET or AUTH_JWT_SECRET_FILE, not both",
    );
}

#[test]
fn a_missing_secret_file_is_refused_naming_the_setting() {
    let refused = backend(&[("AUTH_JWT_SECRET_FILE", "/nonexistent/jwt-secret")]);
    assert_refused(&refused, "AUTH_JWT_SECRET_FILE (/nonexistent/jwt-secret)");
}

/// Secrets on the command line are in every user's process list: there is no flag for them.
#[test]
fn secrets_cannot_be_given_as_flags() {
    for flag in ["--jwt-secret", "--database-url"] {
        let output = Command::new(env!("CARGO_BIN_EXE_backend"))
            .args([flag, REAL_SECRET, "dev-token"])
            .env("APP_ENV", "development")
            .env("POLICY_FILE", POLICY)
            .output()
            .expect("the backend binary runs");
        assert_refused(&output, "unexpected argument");
        assert!(
            !stderr(&output).contains(REAL_SECRET),
            "{flag}: the refusal repeats the secret: {}",
            stderr(&output)
        );
    }
}

/// Production talks TLS to a bank or database on another machine, unless told a layer below
/// protects the link; the refusal names the setting and never repeats a password.
#[test]
fn production_refuses_plaintext_to_a_remote_bank_or_database() {
    let remote_bank = [
        ("AUTH_JWT_SECRET", REAL_SECRET),
        ("BANK_URL", "http://bank.example:8081"),
    ];
    let refused = backend(&remote_bank);
    assert_refused(&refused, "BANK_URL");

    let remote_database = [
        ("AUTH_JWT_SECRET", REAL_SECRET),
        (
            "DATABASE_URL",
            "postgres://app:hunter2-password@db.example/payments?sslmode=require",
        ),
    ];
    let refused = backend(&remote_database);
    assert_refused(&refused, "DATABASE_URL");
    assert!(
        !stderr(&refused).contains("hunter2"),
        "the refusal repeats the password: {}",
        stderr(&refused)
    );

    for settings in [&remote_bank, &remote_database] {
        let mut allowed = settings.to_vec();
        allowed.push(("ALLOW_PLAINTEXT_TRANSPORT", "true"));
        let output = backend(&allowed);
        assert!(output.status.success(), "{}", stderr(&output));
    }
    let verifying = backend(&[
        ("AUTH_JWT_SECRET", REAL_SECRET),
        ("BANK_URL", "https://bank.example"),
        (
            "DATABASE_URL",
            "postgres://app@db.example/payments?sslmode=verify-full&sslrootcert=/ca.pem",
        ),
    ]);
    assert!(verifying.status.success(), "{}", stderr(&verifying));
}

/// `backend serve` with `settings` in production, expected to refuse at start: its output once
/// it exits (killed, and the test failed, if it is still serving after 30 s).
async fn serve_refused(settings: &[(&str, &str)]) -> Output {
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_backend"));
    command
        .arg("serve")
        .env_remove("APP_ENV")
        .env_remove("DATABASE_REPLICATION")
        .env("REQUIRE_EDGE_PROOF", "false")
        .env("AUTH_JWT_SECRET", REAL_SECRET)
        .env("POLICY_FILE", POLICY)
        .env("LISTEN_ADDR", "127.0.0.1:0")
        .env("ADMIN_ADDR", "127.0.0.1:0")
        .env("RUST_LOG", "warn")
        .envs(settings.iter().copied())
        .kill_on_drop(true);
    tokio::time::timeout(std::time::Duration::from_secs(30), command.output())
        .await
        .expect("start-up refused within 30 s, it did not go on serving")
        .expect("the backend binary runs")
}

/// Production starts only where a claim it is told of survives the primary's loss (a
/// synchronous standby), unless `DATABASE_REPLICATION=none` says otherwise: an embedded SQLite
/// file and the machine's one PostgreSQL server are both refused, naming the setting.
#[tokio::test]
async fn production_refuses_an_unreplicated_database_unless_told_naming_the_setting() {
    let data = tempfile::tempdir().expect("a temporary directory");
    let sqlite = format!("sqlite://{}", data.path().join("p.sqlite").display());
    for required in [None, Some("synchronous"), Some("synchronous-strict")] {
        let mut settings = vec![("DATABASE_URL", sqlite.as_str())];
        settings.extend(required.map(|value| ("DATABASE_REPLICATION", value)));
        let refused = serve_refused(&settings).await;
        assert_refused(&refused, "SQLite is one file on one machine");
        assert_refused(&refused, "set DATABASE_REPLICATION=none");
    }

    let single_server = test_harness::TestDatabase::create().await;
    let refused = serve_refused(&[("DATABASE_URL", single_server.url())]).await;
    assert_refused(
        &refused,
        "DATABASE_REPLICATION=synchronous requires commits replicated to a synchronous standby, \
         but no synchronous standby acknowledges commits now",
    );
}

/// Production serves `/v1` only through the edge: without the edge proof's secret it does not
/// start, naming the secret and the setting that turns the proof off; a short secret is
/// refused too.
#[test]
fn production_requires_the_edge_proofs_secret_unless_told_otherwise() {
    let production = [
        ("AUTH_JWT_SECRET", REAL_SECRET),
        ("REQUIRE_EDGE_PROOF", "true"),
    ];
    let refused = backend(&production);
    assert_refused(&refused, "EDGE_PROOF_SECRET is not set");
    assert_refused(&refused, "REQUIRE_EDGE_PROOF=false");
    let short = [production.as_slice(), &[("EDGE_PROOF_SECRET", "short")]].concat();
    assert_refused(
        &backend(&short),
        "EDGE_PROOF_SECRET and EDGE_PROOF_SECRET_PREVIOUS must be at least 32 bytes",
    );
    let proved = [
        production.as_slice(),
        &[(
            "EDGE_PROOF_SECRET",
            "the-edge-proof-secret-0123456789abcdef",
        )],
    ]
    .concat();
    assert!(
        backend(&proved).status.success(),
        "{}",
        stderr(&backend(&proved))
    );
}

/// An identity provider's keys and a shared secret are one or the other; keys fetched in the
/// clear from another machine are refused in production; `dev-token` cannot sign for a
/// provider.
#[test]
fn provider_keys_are_fetched_over_tls_and_never_beside_a_secret() {
    let both = [
        ("AUTH_JWT_SECRET", REAL_SECRET),
        ("AUTH_JWKS_URL", "https://id.example/.well-known/jwks.json"),
    ];
    assert_refused(
        &backend(&both),
        "set AUTH_JWKS_URL (or AUTH_JWKS_FILE) or AUTH_JWT_SECRET, not both",
    );
    let plaintext = [("AUTH_JWKS_URL", "http://id.example/.well-known/jwks.json")];
    assert_refused(
        &backend(&plaintext),
        "the JWKS URL (http://id.example) is plaintext",
    );
    let provider = [("AUTH_JWKS_URL", "https://id.example/.well-known/jwks.json")];
    assert_refused(
        &backend(&provider),
        "dev-token signs only with AUTH_JWT_SECRET",
    );
    let local = [("AUTH_JWKS_URL", "http://127.0.0.1:1/jwks.json")];
    assert_refused(
        &backend(&local),
        "dev-token signs only with AUTH_JWT_SECRET",
    );
}
