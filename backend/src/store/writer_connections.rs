//! The PostgreSQL writer's connections: pool connections that a payment's two statements (the
//! claim and the outcome, `super::claims::postgres`) run on, kept out of the pool between uses.
//!
//! Why: sqlx pings every connection that comes back to its pool (a round trip: `Sync`, then
//! the server's `ReadyForQuery`), to flush whatever a statement cancelled half-way left on it.
//! The claim and the outcome each borrowed a connection, so those pings were two of a
//! payment's four round trips to the database (docs/figures.md, "Where a payment's CPU goes").
//! A connection held here is not given back after a use, so it is not pinged; in exchange, it
//! is kept only after a use that finished ([`WriterConnection::keep`]): one whose statement
//! failed, or whose request was dropped half-way, is closed instead, so a connection in an
//! unknown state is never used again.
//!
//! The rules of the pool's own lending (`super::postgres::connect`) hold here too:
//! - a connection taken from the pool before the last failover is closed, not used
//!   (`super::failover`);
//! - one idle for [`PING_IF_IDLE_FOR`] or more is pinged before it is used; if the ping fails,
//!   it is closed and every connection opened before then is stale
//!   ([`failover::server_closed_one`]);
//! - one held longer than the pool's `max_lifetime` goes back to the pool, which closes it.
//!
//! At most half the pool's connections are held, so the rest of the backend (reads, the
//! reconciler, the janitor, waiting requests) always has the other half; when every held
//! connection is in use, a statement borrows one from the pool as before.

use std::ops::{Deref, DerefMut};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use sqlx::pool::PoolConnection;
use sqlx::{Connection, PgConnection, PgPool, Postgres};

use super::failover::{self, PING_IF_IDLE_FOR};

/// The connections the claim and outcome statements run on (the PostgreSQL
/// [`super::dialect::Dialect::Writer`]).
#[derive(Debug)]
pub struct WriterConnections {
    pool: PgPool,
    idle: Mutex<Vec<Held>>,
    /// Held connections, idle or in use.
    held: AtomicU32,
    most: u32,
}

/// A connection taken out of the pool to be held.
#[derive(Debug)]
struct Held {
    connection: PoolConnection<Postgres>,
    taken_at: Instant,
    last_used: Instant,
}

impl WriterConnections {
    /// Holds at most half of `pool`'s connections (at least one).
    pub fn new(pool: PgPool) -> WriterConnections {
        let most = (pool.options().get_max_connections() / 2).max(1);
        WriterConnections {
            pool,
            idle: Mutex::default(),
            held: AtomicU32::new(0),
            most,
        }
    }

    /// A connection to run one write on: a held one if one is idle (checked as the module
    /// docs say), else a new one to hold if fewer than the most are held, else one borrowed
    /// from the pool for this use.
    pub async fn acquire(&self) -> Result<WriterConnection<'_>, sqlx::Error> {
        while let Some(mut held) = self.take_idle() {
            if failover::is_stale(held.taken_at.elapsed()) {
                held.connection.close_on_drop();
                self.forget(held);
                continue;
            }
            if self.too_old(&held) {
                self.forget(held);
                continue;
            }
            if held.last_used.elapsed() >= PING_IF_IDLE_FOR && held.connection.ping().await.is_err()
            {
                failover::server_closed_one();
                held.connection.close_on_drop();
                self.forget(held);
                continue;
            }
            return Ok(WriterConnection::held(self, held));
        }
        if self.reserve_one() {
            match self.pool.acquire().await {
                Ok(connection) => {
                    let now = Instant::now();
                    let held = Held {
                        connection,
                        taken_at: now,
                        last_used: now,
                    };
                    return Ok(WriterConnection::held(self, held));
                }
                Err(error) => {
                    self.held.fetch_sub(1, Ordering::AcqRel);
                    return Err(error);
                }
            }
        }
        Ok(WriterConnection {
            connection: Some(self.pool.acquire().await?),
            holder: None,
        })
    }

    /// How many held connections are idle now.
    pub fn idle(&self) -> u32 {
        u32::try_from(self.lock_idle().len()).unwrap_or(u32::MAX)
    }

    fn take_idle(&self) -> Option<Held> {
        self.lock_idle().pop()
    }

    fn lock_idle(&self) -> std::sync::MutexGuard<'_, Vec<Held>> {
        // A panic while the lock was held cannot leave the list half-changed: push and pop.
        self.idle
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn too_old(&self, held: &Held) -> bool {
        self.pool
            .options()
            .get_max_lifetime()
            .is_some_and(|lifetime| held.taken_at.elapsed() >= lifetime)
    }

    /// Counts one more held connection, unless the most are held already.
    fn reserve_one(&self) -> bool {
        self.held
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                (held < self.most).then_some(held + 1)
            })
            .is_ok()
    }

    /// Stops holding `held`: dropping it gives it back to the pool (or closes it, if it was
    /// marked to close on drop).
    fn forget(&self, held: Held) {
        self.held.fetch_sub(1, Ordering::AcqRel);
        drop(held);
    }
}

/// One connection lent for one write. Call [`WriterConnection::keep`] once the write finished;
/// dropped without it (an error, or the request's future dropped half-way), a held connection
/// is closed and a borrowed one goes back to the pool, which pings it first.
#[derive(Debug)]
pub struct WriterConnection<'a> {
    connection: Option<PoolConnection<Postgres>>,
    /// The holder and when the connection was taken, for a held connection.
    holder: Option<(&'a WriterConnections, Instant)>,
}

impl<'a> WriterConnection<'a> {
    fn held(holder: &'a WriterConnections, held: Held) -> WriterConnection<'a> {
        WriterConnection {
            connection: Some(held.connection),
            holder: Some((holder, held.taken_at)),
        }
    }

    /// The write finished: a held connection is kept for the next one.
    pub fn keep(mut self) {
        if let (Some((holder, taken_at)), Some(connection)) =
            (self.holder.take(), self.connection.take())
        {
            let held = Held {
                connection,
                taken_at,
                last_used: Instant::now(),
            };
            holder.lock_idle().push(held);
        }
    }
}

impl Drop for WriterConnection<'_> {
    fn drop(&mut self) {
        if let (Some((holder, _)), Some(mut connection)) =
            (self.holder.take(), self.connection.take())
        {
            connection.close_on_drop();
            holder.held.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Deref for WriterConnection<'_> {
    type Target = PgConnection;

    fn deref(&self) -> &PgConnection {
        self.connection
            .as_ref()
            .expect("present until dropped or kept")
    }
}

impl DerefMut for WriterConnection<'_> {
    fn deref_mut(&mut self) -> &mut PgConnection {
        self.connection
            .as_mut()
            .expect("present until dropped or kept")
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use sqlx::postgres::PgPoolOptions;
    use test_harness::TestDatabase;

    use super::*;

    async fn pool_of(database: &TestDatabase, max_connections: u32) -> PgPool {
        PgPoolOptions::new()
            .max_connections(max_connections)
            .connect(database.url())
            .await
            .expect("the test database")
    }

    async fn backend_pid(connection: &mut PgConnection) -> i32 {
        sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(connection)
            .await
            .expect("a pid")
    }

    #[tokio::test]
    async fn a_kept_connection_is_used_again_and_one_dropped_half_way_is_closed() {
        let database = TestDatabase::create().await;
        let writer = WriterConnections::new(pool_of(&database, 4).await);

        let mut first = writer.acquire().await.expect("a connection");
        let kept_pid = backend_pid(&mut first).await;
        first.keep();
        assert_eq!(writer.idle(), 1);

        let mut again = writer.acquire().await.expect("a connection");
        assert_eq!(backend_pid(&mut again).await, kept_pid, "the kept one");
        drop(again);
        assert_eq!(writer.idle(), 0, "a use without keep() is not kept");
        assert_eq!(writer.held.load(Ordering::Acquire), 0);

        let mut next = writer.acquire().await.expect("a connection");
        assert_ne!(backend_pid(&mut next).await, kept_pid, "a fresh one");
    }

    #[tokio::test]
    async fn at_most_half_the_pool_is_held_and_beyond_that_connections_are_borrowed() {
        let database = TestDatabase::create().await;
        let writer = WriterConnections::new(pool_of(&database, 4).await);
        let mut lent = Vec::new();
        for _ in 0..3 {
            lent.push(writer.acquire().await.expect("a connection"));
        }
        let held = lent.iter().filter(|lent| lent.holder.is_some()).count();
        assert_eq!(held, 2, "half of 4");
        for connection in lent {
            connection.keep();
        }
        assert_eq!(writer.idle(), 2, "the borrowed one went back to the pool");
    }

    #[tokio::test]
    async fn a_held_connection_killed_while_idle_is_replaced_before_use() {
        let database = TestDatabase::create().await;
        let pool = pool_of(&database, 4).await;
        let writer = WriterConnections::new(pool.clone());
        let mut first = writer.acquire().await.expect("a connection");
        let killed_pid = backend_pid(&mut first).await;
        first.keep();

        let terminated: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
            .bind(killed_pid)
            .fetch_one(&pool)
            .await
            .expect("terminate");
        assert!(terminated);
        tokio::time::sleep(PING_IF_IDLE_FOR + Duration::from_millis(100)).await;

        let mut next = writer.acquire().await.expect("a live connection");
        assert_ne!(backend_pid(&mut next).await, killed_pid);
        next.keep();
        assert_eq!(
            writer.held.load(Ordering::Acquire),
            1,
            "the dead one is forgotten"
        );
    }

    #[tokio::test]
    async fn a_connection_taken_before_a_failover_is_not_used_again() {
        let database = TestDatabase::create().await;
        let writer = WriterConnections::new(pool_of(&database, 4).await);
        let mut first = writer.acquire().await.expect("a connection");
        let before_pid = backend_pid(&mut first).await;
        first.keep();

        failover::connections_before_now_are_stale();
        let mut next = writer.acquire().await.expect("a connection");
        assert_ne!(backend_pid(&mut next).await, before_pid);
    }
}
