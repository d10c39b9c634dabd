//! [`TestDatabase`]: a fresh, empty PostgreSQL database for one test, named `test_<uuid>`, on
//! the server `TEST_DATABASE_URL` names (default `postgres://postgres@127.0.0.1:5432/postgres`),
//! and dropped when the value is dropped, however the test ends, so tests run in parallel
//! without seeing each other's rows and leave nothing behind.

use sqlx::{Connection, PgConnection};

/// The maintenance database URL.
pub fn admin_url() -> String {
    std::env::var("TEST_DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

/// A database of the test's own; dropped with the value.
#[derive(Debug)]
pub struct TestDatabase {
    name: String,
    url: String,
    /// The server's maintenance database, where the database is dropped from.
    admin: String,
}

impl TestDatabase {
    /// Creates a fresh, empty database on the server [`admin_url`] names.
    pub async fn create() -> TestDatabase {
        TestDatabase::create_on(&admin_url()).await
    }

    /// Creates a fresh, empty database on the server whose maintenance database `admin` names
    /// (a replicated cluster's, say).
    pub async fn create_on(admin: &str) -> TestDatabase {
        let mut conn = PgConnection::connect(admin)
            .await
            .expect("PostgreSQL must be running for these tests (tests/run-all.sh starts it)");
        let name = format!("test_{}", uuid::Uuid::new_v4().simple());
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut conn)
            .await
            .expect("create the test database");
        let (base, _) = admin.rsplit_once('/').expect("the URL names a database");
        TestDatabase {
            url: format!("{base}/{name}"),
            admin: admin.to_owned(),
            name,
        }
    }

    /// Its URL.
    pub fn url(&self) -> &str {
        &self.url
    }
}

/// How long dropping a test database may take before the test goes on without it.
const DROP_WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

impl Drop for TestDatabase {
    /// Drops the database, closing whatever still holds a connection to it. `Drop` cannot
    /// await, so a thread of its own runs the statement on a small runtime and is waited for,
    /// at most [`DROP_WITHIN`]. On a replicated cluster the drop does not wait for a standby
    /// (`synchronous_commit = local`): a cluster a test left without one would hold it for ever.
    fn drop(&mut self) {
        let statement = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        let admin = self.admin.clone();
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            // The timer is made inside the runtime (`timeout` outside it panics).
            runtime.block_on(async {
                let dropping = async {
                    let mut conn = PgConnection::connect(&admin).await?;
                    sqlx::query("SET synchronous_commit TO local")
                        .execute(&mut conn)
                        .await?;
                    sqlx::query(&statement).execute(&mut conn).await?;
                    Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
                };
                tokio::time::timeout(DROP_WITHIN, dropping).await
            })??;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        })
        .join();
        let why = match dropped {
            Ok(Ok(())) => return,
            Ok(Err(error)) => error.to_string(),
            Err(_) => "the dropping thread panicked".to_owned(),
        };
        eprintln!(
            "could not drop the test database {} ({why}); tests/run-all.sh sweeps leftovers",
            self.name
        );
    }
}
