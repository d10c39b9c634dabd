//! The backend's `idempotency_keys` table, read for two things no API offers: a block of user
//! ids no earlier run used (so runs against one database never mix), and how many of a run's
//! keys are still `started` or `unknown` (a `released` key is resolved: the bank never saw it),
//! which is the table's column "unresolved keys": after
//! the night, the backend's reconciler asks the bank about every such key by reference and
//! writes the true outcome, so anything left is money the system cannot account for.

use std::time::{Duration, Instant};

use anyhow::Context;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

/// How often the settling wait looks again.
const SETTLE_POLL: Duration = Duration::from_millis(100);

/// The backend's key table.
#[derive(Debug, Clone)]
pub struct KeyTable {
    pool: PgPool,
}

/// A numbered user's number, or NULL for any other subject.
const NUMBER: &str = "CASE WHEN user_id ~ '^[0-9]{1,18}$' THEN user_id::bigint END";

impl KeyTable {
    /// Connects to the backend's database.
    pub async fn connect(database_url: &str) -> anyhow::Result<KeyTable> {
        let pool = PgPoolOptions::new()
            .max_connections(2)
            .acquire_timeout(Duration::from_secs(5))
            .connect(database_url)
            .await
            .with_context(|| format!("connecting to the backend's database {database_url}"))?;
        Ok(KeyTable { pool })
    }

    /// The first user number above every numbered user with a key (the replay's users are
    /// numbered; a subject that is not a number is another's, and skipped).
    pub async fn next_free_user_id(&self) -> anyhow::Result<u64> {
        let highest: i64 = sqlx::query_scalar(&format!(
            "SELECT COALESCE(max({NUMBER}), 0) FROM idempotency_keys"
        ))
        .fetch_one(&self.pool)
        .await
        .context("reading the highest user id")?;
        Ok(u64::try_from(highest).unwrap_or(0) + 1)
    }

    /// Keys of users `first..=last` that are not finished.
    pub async fn unresolved(&self, first: u64, last: u64) -> anyhow::Result<u64> {
        let count: i64 = sqlx::query_scalar(&format!(
            "SELECT count(*) FROM idempotency_keys \
             WHERE {NUMBER} BETWEEN $1 AND $2 AND state IN ('started', 'unknown')"
        ))
        .bind(i64::try_from(first).context("user id too large")?)
        .bind(i64::try_from(last).context("user id too large")?)
        .fetch_one(&self.pool)
        .await
        .context("counting unresolved keys")?;
        Ok(u64::try_from(count).unwrap_or(0))
    }

    /// Waits up to `within` for the reconciler to resolve every key of users `first..=last`;
    /// returns how many are left and how long it waited.
    pub async fn settle(
        &self,
        first: u64,
        last: u64,
        within: Duration,
    ) -> anyhow::Result<(u64, Duration)> {
        let started = Instant::now();
        loop {
            let left = self.unresolved(first, last).await?;
            if left == 0 || started.elapsed() >= within {
                return Ok((left, started.elapsed()));
            }
            tokio::time::sleep(SETTLE_POLL).await;
        }
    }
}
