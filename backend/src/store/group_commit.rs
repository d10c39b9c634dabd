//! [`GroupCommit`]: SQLite's claims and outcomes written by one writer that gathers them into
//! shared transactions, so many payments share one fsync (docs/design.md, "SQLite's group
//! commit").
//!
//! SQLite has one write lock and, with `synchronous = FULL` (kept: a committed claim must
//! survive a power cut), every commit waits for the disk. Committed one by one, payments queue
//! behind each other's fsyncs. Here a single task takes every write sent to it:
//! - it waits for one, then takes every other write already queued (up to [`MAX_BATCH`]): the
//!   window is the previous batch's commit, during which the next batch gathers;
//! - it runs them in one `BEGIN IMMEDIATE` transaction, each inside its own savepoint, so a
//!   write that fails is undone alone and the others stand;
//! - it commits once, and only then answers each write: nobody hears "claimed" before the
//!   claim is on disk, so a claim is still committed before its bank call (SPEC §5).
//!
//! If the batch cannot begin or commit, each of its writes answers "database unavailable" (a
//! 503 to the client, with nothing saved), as a failed commit of its own would have.

use futures_util::future::BoxFuture;
use sqlx::{Sqlite, SqliteConnection, SqlitePool};
use tokio::sync::{mpsc, oneshot};

use super::db::Exec;
use super::dialect::Dialect;
use super::error::StoreError;

/// The most writes one transaction takes.
pub const MAX_BATCH: usize = 128;

/// How many writes may wait for the writer before senders wait too.
const QUEUE_LENGTH: usize = 1024;

/// One write's statements, run on the batch's connection.
type Write = Box<dyn for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, Ran> + Send>;

/// Answers a write's caller, given whether its batch committed.
type Answer = Box<dyn FnOnce(Result<(), String>) + Send>;

/// A write that ran in the batch.
struct Ran {
    /// What to tell its caller once the batch's fate is known.
    answer: Answer,
    /// `false` if it failed and its changes could not be undone: the batch must not commit.
    undone_or_kept: bool,
}

/// The handle on the writer task. Cheap to clone.
#[derive(Debug, Clone)]
pub struct GroupCommit {
    writes: mpsc::Sender<Write>,
}

impl GroupCommit {
    /// Starts the writer on `pool` (it takes one connection per batch).
    pub fn start(pool: SqlitePool) -> GroupCommit {
        let (writes, queue) = mpsc::channel(QUEUE_LENGTH);
        tokio::spawn(write_batches(pool, queue));
        GroupCommit { writes }
    }

    /// Runs `statements` in the next batch and returns what they returned, once the batch has
    /// committed. Their changes are undone if they fail, or if the batch does not commit.
    pub async fn write<T, F>(&self, statements: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, Result<T, StoreError>>
            + Send
            + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let write: Write = Box::new(move |conn: &mut SqliteConnection| {
            Box::pin(async move {
                let (outcome, undone_or_kept) = in_savepoint(conn, statements).await;
                let answer = Box::new(move |committed: Result<(), String>| {
                    let answer = match committed {
                        Ok(()) => outcome,
                        Err(why) => Err(outcome.err().unwrap_or_else(|| not_written(&why))),
                    };
                    // The caller may have gone (its request timed out): nothing to tell then.
                    let _ = reply.send(answer);
                });
                Ran {
                    answer,
                    undone_or_kept,
                }
            })
        });
        let unrun =
            || not_written("its batch could not begin (see the log), or the writer stopped");
        self.writes.send(write).await.map_err(|_| unrun())?;
        answer.await.unwrap_or_else(|_| Err(unrun()))
    }
}

/// The writer: batch after batch until every handle is dropped.
async fn write_batches(pool: SqlitePool, mut queue: mpsc::Receiver<Write>) {
    while let Some(first) = queue.recv().await {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(write) => batch.push(write),
                Err(_) => break,
            }
        }
        write_batch(&pool, batch).await;
    }
}

/// One transaction for `batch`, then each write's answer.
async fn write_batch(pool: &SqlitePool, batch: Vec<Write>) {
    let mut tx = match Sqlite::begin_write(pool).await {
        Ok(tx) => tx,
        Err(error) => {
            // Nothing ran; dropping the writes tells each caller so.
            tracing::warn!(%error, writes = batch.len(), "could not begin a group commit");
            return;
        }
    };
    let mut ran = Vec::with_capacity(batch.len());
    for write in batch {
        ran.push(write(&mut tx).await);
    }
    let committed = if ran.iter().all(|ran| ran.undone_or_kept) {
        tx.commit().await.map_err(|error| {
            tracing::warn!(%error, writes = ran.len(), "a group commit failed");
            format!("the commit failed: {error}")
        })
    } else {
        // Dropping the transaction rolls every write of the batch back.
        tracing::warn!(
            writes = ran.len(),
            "a failed write could not be undone alone"
        );
        Err("a failed write in its batch could not be undone alone".to_owned())
    };
    for ran in ran {
        (ran.answer)(committed.clone());
    }
}

/// Runs `statements` inside a savepoint of the batch, undoing them alone if they fail; also
/// says whether the batch may still commit (`false` if a failed write could not be undone).
async fn in_savepoint<T, F>(
    conn: &mut SqliteConnection,
    statements: F,
) -> (Result<T, StoreError>, bool)
where
    F: for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, Result<T, StoreError>>,
{
    if let Err(error) = Sqlite::execute(conn, sqlx::query("SAVEPOINT one_write")).await {
        return (Err(error.into()), true);
    }
    let outcome = statements(conn).await;
    if outcome.is_err()
        && let Err(error) = Sqlite::execute(conn, sqlx::query("ROLLBACK TO one_write")).await
    {
        tracing::warn!(%error, "could not undo a failed write");
        return (outcome, false);
    }
    let released = Sqlite::execute(conn, sqlx::query("RELEASE one_write")).await;
    (outcome, released.is_ok())
}

/// The error a write's caller gets when its batch could not be written.
fn not_written(why: &str) -> StoreError {
    StoreError::Unavailable(sqlx::Error::Io(std::io::Error::other(format!(
        "the SQLite group commit wrote nothing: {why}"
    ))))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures_util::future::join_all;

    use super::*;

    async fn scratch_database() -> (tempfile::TempDir, SqlitePool) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let pool =
            super::super::sqlite::open(&dir.path().join("t.sqlite"), 4, Duration::from_secs(3))
                .await
                .expect("open");
        sqlx::query("CREATE TABLE t (id INTEGER PRIMARY KEY, note TEXT NOT NULL)")
            .execute(&pool)
            .await
            .expect("create");
        (dir, pool)
    }

    fn insert(
        id: i64,
    ) -> impl for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, Result<u64, StoreError>>
    {
        move |conn| {
            Box::pin(async move {
                // Two statements, so a failing second one must undo the first.
                Sqlite::execute(
                    conn,
                    sqlx::query("INSERT INTO t VALUES (?1 + 100000, 'first')").bind(id),
                )
                .await?;
                Ok(Sqlite::execute(
                    conn,
                    sqlx::query("INSERT INTO t VALUES (?1, 'second')").bind(id),
                )
                .await?)
            })
        }
    }

    async fn count(pool: &SqlitePool) -> i64 {
        sqlx::query_scalar("SELECT count(*) FROM t")
            .fetch_one(pool)
            .await
            .expect("count")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_failed_write_is_undone_alone_and_the_rest_of_its_batch_commits() {
        let (_dir, pool) = scratch_database().await;
        sqlx::query("INSERT INTO t VALUES (7, 'taken')")
            .execute(&pool)
            .await
            .expect("seed");
        let writer = GroupCommit::start(pool.clone());
        for round in 0..20 {
            let ids = (1..=40).map(|n| round * 100 + n);
            // Id 7 of round 0 collides with the seeded row: that write fails.
            let answers = join_all(ids.map(|id| writer.write(insert(id)))).await;
            let failed = answers.iter().filter(|answer| answer.is_err()).count();
            assert_eq!(failed, usize::from(round == 0), "round {round}");
        }
        // 20 rounds of 40 writes of two rows, less the failed write's two, plus the seed.
        assert_eq!(count(&pool).await, 20 * 40 * 2 - 2 + 1);
        let half_written: i64 = sqlx::query_scalar("SELECT count(*) FROM t WHERE id = 100007")
            .fetch_one(&pool)
            .await
            .expect("count");
        assert_eq!(half_written, 0, "the failed write's first row was undone");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_write_is_answered_only_once_it_is_committed() {
        let (_dir, pool) = scratch_database().await;
        let writer = GroupCommit::start(pool.clone());
        for round in 0..50 {
            let ids = (1..=8).map(|n| round * 10 + n);
            let writes = ids.map(|id| {
                let (writer, pool) = (writer.clone(), pool.clone());
                async move {
                    writer.write(insert(id)).await.expect("written");
                    // Another connection sees it the moment the answer arrives.
                    let seen: i64 = sqlx::query_scalar("SELECT count(*) FROM t WHERE id = ?1")
                        .bind(id)
                        .fetch_one(&pool)
                        .await
                        .expect("read");
                    assert_eq!(seen, 1, "write {id}");
                }
            });
            join_all(writes).await;
        }
    }
}
