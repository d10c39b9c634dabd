//! Start-up refuses what SPEC §3 and §7 say it must: the development JWT secret outside
//! development mode, an invalid policy file (with a message naming the field), timings that
//! could release a claim whose bank call is still on its way, and a token leeway over its bound
//! (naming the setting); and the configured token issuer and audience reach the server. Runs the
//! real `backend` binary; `dev-token` is the cheapest command that needs a full configuration.

use std::process::{Command, Output};

const POLICY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../policy.yaml");
const REAL_SECRET: &str = "a-real-secret-for-this-test-only-0123456789";

fn backend(env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_backend"));
    command
        .arg("dev-token")
        .env_remove("AUTH_JWT_SECRET")
        .env_remove("APP_ENV")
        .env("POLICY_FILE", POLICY);
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().expect("the backend binary runs")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn production_refuses_the_development_secret() {
    let refused = backend(&[]);
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("AUTH_JWT_SECRET is the development default"),
        "{}",
        stderr(&refused)
    );

    let development = backend(&[("APP_ENV", "development")]);
    assert!(development.status.success(), "{}", stderr(&development));

    let production = backend(&[("AUTH_JWT_SECRET", REAL_SECRET)]);
    assert!(production.status.success(), "{}", stderr(&production));
    let token = String::from_utf8_lossy(&production.stdout);
    assert_eq!(token.trim().split('.').count(), 3, "a JWT: {token}");
}

#[test]
fn a_short_secret_is_refused() {
    let refused = backend(&[("AUTH_JWT_SECRET", "short")]);
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("at least 32 bytes"),
        "{}",
        stderr(&refused)
    );
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
        assert!(!refused.status.success(), "{field}: started anyway");
        assert!(
            stderr(&refused).contains(field),
            "{field}: {}",
            stderr(&refused)
        );
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
    assert!(!refused.status.success(), "started anyway");
    assert!(
        stderr(&refused).contains("AUTH_JWT_LEEWAY_SECONDS"),
        "{}",
        stderr(&refused)
    );
    let at_most = backend(&[
        ("AUTH_JWT_SECRET", REAL_SECRET),
        ("AUTH_JWT_LEEWAY_SECONDS", "300"),
    ]);
    assert!(at_most.status.success(), "{}", stderr(&at_most));
}

/// A `backend serve` child, killed when dropped.
struct Serving(std::process::Child);

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn a_configured_issuer_and_audience_are_required_of_every_token() {
    let rules = [
        ("AUTH_JWT_SECRET", REAL_SECRET),
        ("AUTH_JWT_ISSUER", "https://id.example"),
        ("AUTH_JWT_AUDIENCE", "payments"),
    ];
    // dev-token mints with what the configuration requires; without it, a token lacks both.
    let minted = backend(&rules);
    assert!(minted.status.success(), "{}", stderr(&minted));
    let token = String::from_utf8_lossy(&minted.stdout).trim().to_owned();
    let without_them =
        String::from_utf8_lossy(&backend(&[("AUTH_JWT_SECRET", REAL_SECRET)]).stdout)
            .trim()
            .to_owned();

    // The server accepts the first and refuses the second.
    let data = tempfile::tempdir().expect("a temporary directory");
    let address = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port");
    let mut command = Command::new(env!("CARGO_BIN_EXE_backend"));
    command
        .arg("serve")
        .env_remove("APP_ENV")
        .env("POLICY_FILE", POLICY)
        .env("LISTEN_ADDR", address.to_string())
        .env(
            "DATABASE_URL",
            format!("sqlite://{}", data.path().join("p.sqlite").display()),
        )
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    for (name, value) in rules {
        command.env(name, value);
    }
    let _server = Serving(command.spawn().expect("backend serve starts"));
    let http = reqwest::Client::new();
    let base = format!("http://{address}");
    let mut ready = false;
    for _ in 0..150 {
        if http.get(format!("{base}/healthz")).send().await.is_ok() {
            ready = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(ready, "backend serve did not answer within 15 s");
    let status_with = |token: String| {
        let request = http
            .get(format!(
                "{base}/v1/payments/8e03978e-40d5-43e8-bc93-6894a57f9324"
            ))
            .bearer_auth(token);
        async move { request.send().await.expect("answers").status().as_u16() }
    };
    assert_eq!(
        status_with(token).await,
        404,
        "authenticated; no such payment"
    );
    assert_eq!(status_with(without_them).await, 401);
}
