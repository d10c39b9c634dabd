//! The incident replay end to end, on the real stack: PostgreSQL (a fresh database), the bank
//! simulator and two backends (the shipped policy, and one requiring no key for the no-key
//! phone) served in this process on real sockets, and the `incident-replay` binary as a child
//! process driving them over HTTP. Small and compressed (24 customers, 1 s of the night = 10 ms)
//! so it runs in seconds, yet the same night must show the bug and its fix: the plain-retry
//! phones debit customers twice, the rule-following phones (with `Prefer: wait` and without,
//! and the TypeScript package under Node) never do and leave no key unresolved. The replay also draws its chart (`--chart`), which must
//! give every client a panel and cross (b)'s double debits.

use std::path::{Path, PathBuf};
use std::time::Duration;

use backend::config::{BankConfig, Config, Drain, Identity, Limits};
use backend::durability::Replication;
use backend::startup::Application;
use bank_simulator::{BankSimulator, Knobs, RunningBank};
use serde_json::Value;
use shared::Policy;
use test_harness::TestDatabase;
use tokio::process::Command;
use tokio::sync::oneshot;

const SECRET: &str = "incident-test-secret-that-is-at-least-32-bytes";

/// Real milliseconds per second of the night.
const TIME_SCALE_MS: u64 = 10;

/// A backend serving until dropped.
struct RunningBackend {
    url: String,
    _stop: oneshot::Sender<()>,
}

/// A backend with its reconciler running, as in production, waiting 30 s of the night for the
/// bank (past the bank's slowest reply, short of a lost one).
async fn start_backend(database_url: &str, bank: &RunningBank, policy: Policy) -> RunningBackend {
    let config = Config {
        database_url: database_url.into(),
        bank_url: bank.url.clone(),
        bank_ca_file: None,
        listen_addr: "127.0.0.1:0".parse().expect("address"),
        admin_addr: "127.0.0.1:0".parse().expect("address"),
        cors_allowed_origins: Default::default(),
        // The replay needs no operator console.
        identity: Identity::with_secrets(SECRET, None),
        // The machine's one PostgreSQL server.
        replication: Replication::None,
        policy,
        bank_timeout: Duration::from_millis(30 * TIME_SCALE_MS),
        bank: BankConfig::default(),
        database_acquire_timeout: Duration::from_secs(3),
        reconcile_interval: Duration::from_millis(50),
        janitor_interval: Duration::from_secs(3600),
        trail_kept_after_key: Duration::from_secs(90 * 24 * 3600),
        run_workers: true,
        limits: Limits::default(),
        migrate_on_start: true,
        drain: Drain {
            grace: Duration::ZERO,
            deadline: Duration::from_secs(15),
        },
    };
    let app = Application::build(config).await.expect("backend builds");
    let url = format!("http://{}", app.local_addr());
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(app.run_until_stopped(async move {
        stopped.await.ok();
    }));
    RunningBackend { url, _stop: stop }
}

/// The tests' policy: the shipped one with the status-check rules scaled to seconds.
const TEST_POLICY_YAML: &str = include_str!("../../../tests/policy-for-tests.yaml");

fn policy_requiring_no_key() -> Policy {
    let yaml = TEST_POLICY_YAML
        .lines()
        .map(|line| {
            if line.trim_start().starts_with("required_for:") {
                "  required_for: []"
            } else {
                line
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    Policy::from_yaml(&yaml).expect("valid policy")
}

/// The chart is an SVG with a titled panel per client, and (b)'s panel crosses its double
/// debits: the crosses are the only strokes of `#D62728` (see `src/chart.rs`).
fn check_chart(path: &Path, new_key: &Value) {
    let svg = std::fs::read_to_string(path).expect("the replay wrote its chart");
    let _ = std::fs::remove_file(path);
    assert!(svg.starts_with("<svg") && svg.contains("phone timeout 15 s"));
    let titles = [
        "(a) no key, plain retries: ",
        "(b) new key per retry: ",
        "(c) one key (library), no wait: ",
        "(d) one key (library), Prefer: wait: ",
        "(e) TypeScript package, Prefer: wait: ",
    ];
    let starts: Vec<usize> = titles
        .iter()
        .map(|title| {
            svg.find(title)
                .unwrap_or_else(|| panic!("no panel {title}"))
        })
        .collect();
    let new_key_panel = &svg[starts[1]..starts[2]];
    let charged_twice = format!("{} customer", new_key["debited_twice"]);
    assert!(
        new_key_panel.contains(&charged_twice),
        "(b)'s title gives its {charged_twice}s charged twice"
    );
    assert!(
        new_key_panel.contains(r##"stroke="#D62728""##),
        "(b)'s double debits are crossed in its panel"
    );
}

/// Client (e)'s Node script, compiled by `npm run build:stack` (a step of the test command).
fn typescript_phones() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../clients/typescript/.build-stack/tools/replay-phones.js");
    assert!(
        script.is_file(),
        "{} is missing: cd clients/typescript && npm ci && npm run build:stack",
        script.display()
    );
    script
}

fn row<'a>(tallies: &'a [Value], client: &str) -> &'a Value {
    tallies
        .iter()
        .find(|tally| tally["client"] == client)
        .unwrap_or_else(|| panic!("no row for {client}: {tallies:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_retries_debit_twice_and_the_rule_following_client_never_does() {
    let bank = BankSimulator::spawn(Knobs::default())
        .await
        .expect("bank starts");
    let database = TestDatabase::create().await;
    let database_url = database.url().to_owned();
    let backend = start_backend(
        &database_url,
        &bank,
        Policy::from_yaml(TEST_POLICY_YAML).expect("valid"),
    )
    .await;
    let no_key_backend = start_backend(&database_url, &bank, policy_requiring_no_key()).await;
    let chart = std::env::temp_dir().join(format!("incident-night-{}.svg", std::process::id()));

    let replay = Command::new(env!("CARGO_BIN_EXE_incident-replay"))
        .args(["--api", &backend.url, "--no-key-api", &no_key_backend.url])
        .args(["--bank", &bank.url, "--database-url", &database_url])
        .args(["--secret", SECRET, "--json"])
        .args(["--customers", "24", "--seed", "7"])
        .args(["--time-scale", &TIME_SCALE_MS.to_string()])
        .args(["--evening-seconds", "100", "--settle-seconds", "15"])
        .arg("--typescript-phones")
        .arg(typescript_phones())
        .arg("--chart")
        .arg(&chart)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(90), replay)
        .await
        .expect("the replay finishes within 90 s")
        .expect("the replay runs");
    let narration = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "replay failed:\n{narration}");
    let tallies: Vec<Value> = serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("not JSON ({error}):\n{narration}"));

    let plain = row(&tallies, "no_key");
    assert!(
        plain["debited_twice"].as_u64() > Some(0) && plain["extra_paise"].as_u64() > Some(0),
        "the plain-retry phones must debit someone twice on this night:\n{narration}"
    );
    let new_key = row(&tallies, "new_key_per_retry");
    assert!(
        new_key["debited_twice"].as_u64() > Some(0),
        "a new key per retry must debit someone twice too:\n{narration}"
    );
    check_chart(&chart, new_key);

    // (c) without `Prefer: wait`, (d) with it, and (e) the TypeScript package under Node: the
    // wait and the language change how replies come, never how often money moves.
    for client in [
        "rule_following",
        "rule_following_with_wait",
        "typescript_package",
    ] {
        let rules = row(&tallies, client);
        assert_eq!(rules["payments"], 24, "{client}");
        assert_eq!(rules["double_debits"], 0, "{client}: {narration}");
        assert_eq!(rules["debited_twice"], 0, "{client}: {narration}");
        assert_eq!(rules["extra_paise"], 0, "{client}: {narration}");
        assert_eq!(rules["unresolved_keys"], 0, "{client}: {narration}");
        assert_eq!(rules["no_final_reply"], 0, "{client}: {narration}");
        assert_eq!(
            rules["bank_debits"], rules["paid"],
            "{client}: every customer told 'paid' was debited exactly once, and nobody \
             else:\n{narration}"
        );
    }
}
