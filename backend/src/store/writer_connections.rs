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
//!   it is closed and every connection opened before then is stale (`super::failover`);
//! - one held longer than the pool's `max_lifetime` goes back to the pool, which closes it.
//!
//! At most half the pool's connections are held, so the rest of the backend (reads, the
//! reconciler, the janitor, waiting requests) always has the other half; when every held
//! connection is in use, a statement borrows one from the pool as before.

use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use sqlx::pool::PoolConnection;
use sqlx::{Connection, PgConnection, PgPool, Postgres};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::failover::{self, PING_IF_IDLE_FOR};

/// The connections the claim and outcome statements run on (the PostgreSQL
/// [`super::dialect::Dialect::Writer`]).
#[derive(Debug)]
pub struct WriterConnections {
    pool: PgPool,
    idle: Mutex<Vec<Held>>,
    /// One permit per connection that may be held; a held connection, idle or lent, carries
    /// its permit, so however it is dropped (a future cancelled half-way included) its place is
    /// given back.
    places: Arc<Semaphore>,
}

/// A connection taken out of the pool to be held, idle between uses.
#[derive(Debug)]
struct Held {
    connection: PoolConnection<Postgres>,
    place: Place,
    last_used: Instant,
}

/// A held connection's place among the most that may be held.
#[derive(Debug)]
struct Place {
    taken_at: Instant,
    _permit: OwnedSemaphorePermit,
}

impl WriterConnections {
    /// Holds at most half of `pool`'s connections (at least one).
    pub fn new(pool: PgPool) -> WriterConnections {
        let most = (pool.options().get_max_connections() / 2).max(1);
        WriterConnections {
            pool,
            idle: Mutex::default(),
            places: Arc::new(Semaphore::new(most as usize)),
        }
    }

    /// A connection to run one write on: a held one if one is idle (checked as the module
    /// docs say), else a new one to hold if fewer than the most are held, else one borrowed
    /// from the pool for this use. A connection dropped here (stale, too old, or failing its
    /// ping) gives its place back with it.
    pub async fn acquire(&self) -> Result<WriterConnection<'_>, sqlx::Error> {
        while let Some(mut held) = self.take_idle() {
            if failover::is_stale(held.place.taken_at.elapsed()) {
                held.connection.close_on_drop();
                continue;
            }
            if self.too_old(&held.place) {
                continue;
            }
            if held.last_used.elapsed() >= PING_IF_IDLE_FOR && held.connection.ping().await.is_err()
            {
                failover::connections_before_now_are_stale();
                held.connection.close_on_drop();
                continue;
            }
            return Ok(WriterConnection {
                connection: Some(held.connection),
                holder: Some((self, held.place)),
            });
        }
        if let Ok(permit) = Arc::clone(&self.places).try_acquire_owned() {
            let place = Place {
                taken_at: Instant::now(),
                _permit: permit,
            };
            return Ok(WriterConnection {
                connection: Some(self.pool.acquire().await?),
                holder: Some((self, place)),
            });
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

    fn lock_idle(&self) -> MutexGuard<'_, Vec<Held>> {
        // A panic while the lock was held cannot leave the list half-changed: push and pop.
        self.idle.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn too_old(&self, place: &Place) -> bool {
        self.pool
            .options()
            .get_max_lifetime()
            .is_some_and(|lifetime| place.taken_at.elapsed() >= lifetime)
    }
}

/// One connection lent for one write. Call [`WriterConnection::keep`] once the write finished;
/// dropped without it (an error, or the request's future dropped half-way), a held connection
/// is closed and a borrowed one goes back to the pool, which pings it first.
#[derive(Debug)]
pub struct WriterConnection<'a> {
    connection: Option<PoolConnection<Postgres>>,
    /// The holder and the connection's place, for a held connection.
    holder: Option<(&'a WriterConnections, Place)>,
}

impl WriterConnection<'_> {
    /// The write finished: a held connection is kept for the next one.
    pub fn keep(mut self) {
        if let (Some((holder, place)), Some(connection)) =
            (self.holder.take(), self.connection.take())
        {
            let held = Held {
                connection,
                place,
                last_used: Instant::now(),
            };
            holder.lock_idle().push(held);
        }
    }
}

impl Drop for WriterConnection<'_> {
    fn drop(&mut self) {
        if let (Some(_), Some(connection)) = (&self.holder, &mut self.connection) {
            connection.close_on_drop();
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

    /// How many connections `writer` holds, idle or lent.
    fn held(writer: &WriterConnections) -> usize {
        let most = (writer.pool.options().get_max_connections() / 2) as usize;
        most - writer.places.available_permits()
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
        assert_eq!(held(&writer), 0);

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
        assert_eq!(held(&writer), 1, "the dead one gave its place back");
    }

    #[tokio::test]
    async fn a_use_cancelled_while_waiting_for_the_pool_gives_its_place_back() {
        let database = TestDatabase::create().await;
        let pool = pool_of(&database, 2).await;
        let writer = WriterConnections::new(pool.clone());
        let taken = [
            pool.acquire().await.expect("a connection"),
            pool.acquire().await.expect("a connection"),
        ];
        let waiting = tokio::time::timeout(Duration::from_millis(100), writer.acquire()).await;
        assert!(
            waiting.is_err(),
            "the pool is exhausted, so the acquire waits"
        );
        assert_eq!(held(&writer), 0, "the cancelled acquire holds nothing");
        drop(taken);

        let mut next = writer.acquire().await.expect("a connection");
        assert!(next.holder.is_some(), "the place was free again");
        backend_pid(&mut next).await;
        next.keep();
        assert_eq!(held(&writer), 1);
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
