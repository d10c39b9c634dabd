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

impl Drop for TestDatabase {
    /// Drops the database, closing whatever still holds a connection to it. `Drop` cannot
    /// await, so a thread of its own runs the statement on a small runtime and is waited for.
    fn drop(&mut self) {
        let statement = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        let admin = self.admin.clone();
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(async {
                let mut conn = PgConnection::connect(&admin).await?;
                sqlx::query(&statement).execute(&mut conn).await?;
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
            })?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!(
                "could not drop the test database {}; tests/run-all.sh sweeps leftovers",
                self.name
            );
        }
    }
}
