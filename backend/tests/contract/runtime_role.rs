//! Migrations as a release step (`MIGRATE_ON_START=false`), with the real binary: a runtime
//! role that may read and write the tables but not change the schema (no `CREATE` on the
//! schema) serves payments once `backend migrate` has run as the owner; before that, `serve`
//! refuses to start, naming `backend migrate`, and changes nothing.

use std::process::Command;

use bank_simulator::{BankSimulator, Knobs};
use sqlx::PgPool;

use crate::support::TestDatabase;
use crate::support::process::{BackendEnv, BackendProcess, POLICY_FILE};
use crate::support::{new_key, payment_body, send_pay};

const RUNTIME_ROLE: &str = "payments_runtime_test";

/// `url` with `role` as its user.
fn as_role(url: &str, role: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL");
    let rest = rest.split_once('@').map_or(rest, |(_, host)| host);
    format!("{scheme}://{role}@{rest}")
}

/// `backend SUBCOMMAND` on `database_url` with the settings a production replica has.
fn backend(subcommand: &str, database_url: &str, extra: &[(&str, &str)]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_backend"))
        .arg(subcommand)
        .env_clear()
        .env("DATABASE_URL", database_url)
        .env("APP_ENV", "production")
        .env("DATABASE_REPLICATION", "none")
        .env("REQUIRE_EDGE_PROOF", "false")
        .env("AUTH_JWT_SECRET", crate::support::SECRET)
        .env("POLICY_FILE", POLICY_FILE)
        .env("LISTEN_ADDR", "127.0.0.1:0")
        .env("ADMIN_ADDR", "127.0.0.1:0")
        .envs(extra.iter().copied())
        .output()
        .expect("the backend binary runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_without_ddl_rights_serves_once_migrate_has_run_and_not_before() {
    let database = TestDatabase::create().await;
    let owner = PgPool::connect(database.url()).await.expect("connect");
    sqlx::query(&format!(
        "DO $$ BEGIN CREATE ROLE {RUNTIME_ROLE} LOGIN; \
         EXCEPTION WHEN duplicate_object THEN NULL; END $$"
    ))
    .execute(&owner)
    .await
    .expect("the runtime role");
    let runtime_url = as_role(database.url(), RUNTIME_ROLE);
    let may_create: bool = sqlx::query_scalar(&format!(
        "SELECT has_schema_privilege('{RUNTIME_ROLE}', 'public', 'CREATE')"
    ))
    .fetch_one(&owner)
    .await
    .expect("the role's rights");
    assert!(
        !may_create,
        "the runtime role must not be able to change the schema"
    );

    let refused = backend("serve", &runtime_url, &[("MIGRATE_ON_START", "false")]);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success(),
        "serve started on an unmigrated database"
    );
    assert!(said.contains("backend migrate"), "{said}");
    let tables: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'",
    )
    .fetch_one(&owner)
    .await
    .expect("count tables");
    assert_eq!(tables, 0, "a refused start changes nothing");

    let migrated = backend("migrate", database.url(), &[]);
    assert!(
        migrated.status.success(),
        "{}",
        String::from_utf8_lossy(&migrated.stderr)
    );
    for grant in [
        format!(
            "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {RUNTIME_ROLE}"
        ),
        format!("GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {RUNTIME_ROLE}"),
    ] {
        sqlx::query(&grant).execute(&owner).await.expect("grant");
    }

    let bank = BankSimulator::spawn(Knobs::default())
        .await
        .expect("the bank starts");
    let mut env = BackendEnv::new(&runtime_url, &bank.url);
    env.extra = vec![("MIGRATE_ON_START".into(), "false".into())];
    let replica = BackendProcess::start(&env).await;
    let http = reqwest::Client::new();
    let key = new_key();
    let body = payment_body(3_000);
    let paid = send_pay(&http, &replica.url, 5, Some(&key), "elec-5", &body)
        .await
        .expect("a reply");
    assert_eq!(paid.status, 201, "{}", String::from_utf8_lossy(&paid.bytes));
    let replayed = send_pay(&http, &replica.url, 5, Some(&key), "elec-5", &body)
        .await
        .expect("a reply");
    assert!(replayed.is_replay());
    assert_eq!(bank.simulator.ledger().debits.len(), 1);
}
