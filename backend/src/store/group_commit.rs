//! [`GroupCommit`]: SQLite's claims and outcomes written by one writer that gathers them into
//! shared transactions, so many payments share one fsync (docs/design.md, "SQLite's group
//! commit").
//!
//! SQLite has one write lock and, with `synchronous = FULL` (kept: a committed claim must
//! survive a power cut), every commit waits for the disk. Committed one by one, payments queue
//! behind each other's fsyncs. Here a single task takes every write sent to it:
//! - it waits for one, then takes every other write already queued (up to [`MAX_BATCH`]): the
//!   window is the previous batch's commit, during which the next batch gathers;
//! - it runs them in one `BEGIN IMMEDIATE` transaction on a connection of its own, each inside
//!   its own savepoint, so a write that fails is undone alone and the others stand;
//! - it commits once, and only then replies to each write: nobody hears "claimed" before the
//!   claim is on disk, so a claim is still committed before its bank call (SPEC §5).
//!
//! **Nothing is ever written outside the batch's transaction.** SQLite rolls a transaction back
//! by itself on some errors (`SQLITE_FULL`, `SQLITE_IOERR`, `SQLITE_NOMEM`); a `SAVEPOINT` run
//! after that would open a transaction of its own, and its `RELEASE` commit it, while the batch
//! goes on to tell every caller "nothing written". So each write's savepoint is released before
//! the next write's opens, and its name is private to the writer: a random one per writer task,
//! which no write knows. sqlx hands every statement string to a thread of the connection's own,
//! a trip of two thread wake-ups, so the boundaries ride with the statements: a write reaches
//! the connection only through its [`Opening`], which sends the write's first statement string
//! with the boundary in front (`BEGIN IMMEDIATE; SAVEPOINT s; ` for the batch's first write,
//! `RELEASE s; SAVEPOINT s; ` for each later one) and only then hands the connection over;
//! `RELEASE s; COMMIT` follows the last write. SQLite runs the statements of a string in order and
//! stops at the first that fails, so a write's statements never run unless its opening did, and
//! no write can send a statement without one. If the transaction could not begin or is gone,
//! that `RELEASE` (or the undo of a failed write, `ROLLBACK TO s`) finds no such savepoint and
//! fails, whatever the write did meanwhile. The first such failure stops the batch: the rest do
//! not run, the batch is rolled back whole, every caller hears "not written" (a 503 to the
//! client, with nothing saved), and the writer closes the connection and opens a fresh one for
//! the next batch. A write that returns without sending anything changed nothing: its reply is
//! its own, and the next write's opening is the one it did not send.
//!
//! **The writer is supervised.** Should its task end (a write that panics), the supervisor
//! counts it, marks the writer stopped (readiness then says not ready: [`GroupCommit::health`])
//! and starts it again after [`RESTART_PAUSE`]; the writes waiting in the queue are written by
//! the new task. The dead task's connection is dropped with it, which rolls its open
//! transaction back.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use futures_util::future::BoxFuture;
use sqlx::query::Query;
use sqlx::sqlite::{SqliteArguments, SqliteConnectOptions, SqliteRow};
use sqlx::{ConnectOptions, Sqlite, SqliteConnection, SqlitePool};
use tokio::sync::{Mutex, mpsc, oneshot};

use super::db::Exec;
use super::error::StoreError;

/// The most writes one transaction takes.
pub const MAX_BATCH: usize = 128;

/// How many writes may wait for the writer before senders wait too.
const QUEUE_LENGTH: usize = 1024;

/// How long the supervisor waits before starting a writer whose task ended: writes queue
/// meanwhile, and readiness reports the writer stopped.
pub const RESTART_PAUSE: Duration = Duration::from_secs(1);

/// One write: its statements, sent through its [`Opening`], the only way it reaches the
/// batch's connection.
type Write = Box<dyn for<'c> FnOnce(Opening<'c>) -> BoxFuture<'c, Ran> + Send>;

/// A write's way to the batch's connection. Its first statement string goes with the statements
/// that open its savepoint (and, for the batch's first write, the batch's transaction), in one
/// trip to SQLite's thread; only then is the connection handed over, for any later statements.
/// So no write can send a statement that is not preceded by its opening.
pub struct Opening<'c> {
    conn: &'c mut SqliteConnection,
    /// The statements in front of the write's first string, ending with a separator.
    statements: &'c str,
    /// Set as the opening is sent: the writer then knows the write may have changed something
    /// (so its savepoint may need undoing) and that a transaction has begun.
    sent: &'c AtomicBool,
}

/// A query over the statements it is given, with the write's arguments bound.
pub type Bound<'q> = Query<'q, Sqlite, SqliteArguments<'q>>;

impl<'c> Opening<'c> {
    /// Runs the write's first `statements`, with the opening in front and the arguments `bind`
    /// binds, and returns their rows with the connection for the write's later statements.
    pub async fn fetch_all<B>(
        self,
        statements: &str,
        bind: B,
    ) -> Result<(Vec<SqliteRow>, &'c mut SqliteConnection), StoreError>
    where
        B: for<'q> FnOnce(&'q str) -> Bound<'q>,
    {
        let sql = format!("{}{statements}", self.statements);
        self.sent.store(true, Ordering::Relaxed);
        let rows = Sqlite::fetch_all(&mut *self.conn, bind(&sql)).await?;
        Ok((rows, self.conn))
    }
}

/// Replies to a write's caller, given whether its batch committed and whether the write's own
/// failure, if it failed, was undone alone (so was its own, not its opening's).
type Acknowledge = Box<dyn FnOnce(Result<(), String>, bool) + Send>;

/// A write that ran in the batch.
struct Ran {
    /// What to tell its caller once the batch's fate is known.
    acknowledge: Acknowledge,
    /// Whether its statements failed: their changes must be undone, back to its savepoint.
    failed: bool,
    /// Whether that undo succeeded. If it did not, the failure may have been its opening's
    /// (the batch's transaction gone), and the caller hears the batch's "not written".
    undone_alone: bool,
}

/// Whether the writer runs, and how often it had to be started again.
#[derive(Debug, Default)]
pub struct WriterHealth {
    stopped: AtomicBool,
    restarts: AtomicU64,
}

impl WriterHealth {
    /// Whether the writer task is running (writes are being written).
    pub fn is_running(&self) -> bool {
        !self.stopped.load(Ordering::Relaxed)
    }

    /// How many times the writer task ended and was started again.
    pub fn restarts(&self) -> u64 {
        self.restarts.load(Ordering::Relaxed)
    }
}

/// The handle on the writer task. Cheap to clone.
#[derive(Debug, Clone)]
pub struct GroupCommit {
    writes: mpsc::Sender<Write>,
    health: Arc<WriterHealth>,
}

impl GroupCommit {
    /// Starts the writer on a connection of its own, opened with `pool`'s options.
    pub fn start(pool: &SqlitePool) -> GroupCommit {
        let (writes, queue) = mpsc::channel(QUEUE_LENGTH);
        let health = Arc::new(WriterHealth::default());
        let options = (*pool.connect_options()).clone();
        tokio::spawn(supervise(options, queue, Arc::clone(&health)));
        GroupCommit { writes, health }
    }

    /// Whether the writer runs, and its restarts.
    pub fn health(&self) -> &WriterHealth {
        &self.health
    }

    /// Runs `statements` in the next batch and returns what they returned, once the batch has
    /// committed. Their changes are undone if they fail, or if the batch does not commit.
    pub async fn write<T, F>(&self, statements: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(Opening<'c>) -> BoxFuture<'c, Result<T, StoreError>> + Send + 'static,
    {
        let (sender, reply) = oneshot::channel();
        let write: Write = Box::new(move |opening| {
            Box::pin(async move {
                let outcome = statements(opening).await;
                let failed = outcome.is_err();
                let acknowledge = Box::new(move |committed: Result<(), String>, undone_alone| {
                    let reply = match (committed, outcome) {
                        (Ok(()), outcome) => outcome,
                        (Err(_), Err(own)) if undone_alone => Err(own),
                        (Err(why), _) => Err(not_written(&why)),
                    };
                    // The caller may have gone (its request timed out): nothing to tell then.
                    let _ = sender.send(reply);
                });
                Ran {
                    acknowledge,
                    failed,
                    undone_alone: false,
                }
            })
        });
        let unrun = || {
            not_written(
                "its batch could not begin or was stopped before it (see the log), or the \
                 writer stopped",
            )
        };
        self.writes.send(write).await.map_err(|_| unrun())?;
        reply.await.unwrap_or_else(|_| Err(unrun()))
    }
}

/// Runs the writer until every handle is dropped, starting it again whenever its task ends
/// otherwise (it panicked).
async fn supervise(
    options: SqliteConnectOptions,
    queue: mpsc::Receiver<Write>,
    health: Arc<WriterHealth>,
) {
    let queue = Arc::new(Mutex::new(queue));
    loop {
        let writer = tokio::spawn(write_batches(options.clone(), Arc::clone(&queue)));
        match writer.await {
            Ok(()) => return,
            Err(ended) => {
                health.stopped.store(true, Ordering::Relaxed);
                health.restarts.fetch_add(1, Ordering::Relaxed);
                tracing::error!(error = %ended, "the SQLite writer stopped; starting it again");
                tokio::time::sleep(RESTART_PAUSE).await;
                health.stopped.store(false, Ordering::Relaxed);
            }
        }
    }
}

/// The writer: batch after batch until every handle is dropped, on one connection, replaced
/// after a batch that failed.
async fn write_batches(options: SqliteConnectOptions, queue: Arc<Mutex<mpsc::Receiver<Write>>>) {
    let mut queue = queue.lock().await;
    let savepoint = Savepoint::private();
    let mut connection: Option<SqliteConnection> = None;
    while let Some(first) = queue.recv().await {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(write) => batch.push(write),
                Err(_) => break,
            }
        }
        let mut conn = match connection.take() {
            Some(conn) => conn,
            None => match options.connect().await {
                Ok(conn) => conn,
                Err(error) => {
                    // Nothing ran; dropping the writes tells each caller so.
                    tracing::warn!(%error, writes = batch.len(), "the SQLite writer cannot connect");
                    continue;
                }
            },
        };
        if write_batch(&mut conn, &savepoint, batch).await {
            connection = Some(conn);
        }
    }
}

/// The statements that open, close and undo each write's savepoint, under a name no write
/// knows, so none can open or close it by mistake (see the module docs). The two openings end
/// with the separator before the write's own statements.
struct Savepoint {
    /// Begins the batch's transaction and opens its first write's savepoint.
    begin_and_open: String,
    /// Closes the last write's savepoint, keeping its changes, and opens the next one's.
    release_and_open: String,
    /// Undoes a failed write's changes, leaving its savepoint open (empty).
    undo: String,
    /// Closes the last write's savepoint and commits the batch.
    release_and_commit: String,
}

impl Savepoint {
    /// Statements for a savepoint with a fresh random name.
    fn private() -> Savepoint {
        let name = format!("group_commit_{}", uuid::Uuid::new_v4().simple());
        Savepoint {
            begin_and_open: format!("BEGIN IMMEDIATE; SAVEPOINT {name}; "),
            release_and_open: format!("RELEASE {name}; SAVEPOINT {name}; "),
            undo: format!("ROLLBACK TO {name}"),
            release_and_commit: format!("RELEASE {name}; COMMIT"),
        }
    }
}

/// One transaction for `batch`, each write in `savepoint`, then each write's reply. `false`
/// if the batch failed: the connection is then in a state not worth trusting, and is closed.
async fn write_batch(
    conn: &mut SqliteConnection,
    savepoint: &Savepoint,
    batch: Vec<Write>,
) -> bool {
    let writes = batch.len();
    let mut ran = Vec::with_capacity(writes);
    let mut stopped: Option<String> = None;
    // Whether a write has sent its opening: until one has, the transaction has not begun, and
    // the next write's opening begins it.
    let mut begun = false;
    for write in batch {
        let sent = AtomicBool::new(false);
        let opening = Opening {
            conn: &mut *conn,
            statements: if begun {
                &savepoint.release_and_open
            } else {
                &savepoint.begin_and_open
            },
            sent: &sent,
        };
        let mut one = write(opening).await;
        let sent = sent.load(Ordering::Relaxed);
        begun |= sent;
        if one.failed && !sent {
            // It failed before sending anything, so it changed nothing: its error is its own.
            one.undone_alone = true;
        } else if one.failed {
            // A failed opening (the batch's transaction gone, or never begun) fails the undo
            // too: the batch then stops.
            match Sqlite::execute(&mut *conn, sqlx::query(&savepoint.undo)).await {
                Ok(_) => one.undone_alone = true,
                Err(error) => {
                    stopped = Some(format!(
                        "a failed write could not be undone alone (the batch's transaction \
                         could not begin, or ended under it): {error}"
                    ))
                }
            }
        }
        ran.push(one);
        if stopped.is_some() {
            break;
        }
    }
    // Writes the loop did not reach are dropped here, which tells their callers "not written".
    let committed = match stopped {
        None if !begun => Ok(()),
        None => Sqlite::execute(&mut *conn, sqlx::query(&savepoint.release_and_commit))
            .await
            .map(drop)
            .map_err(|error| format!("the commit (or the last write's release) failed: {error}")),
        Some(why) => Err(why),
    };
    if let Err(why) = &committed {
        tracing::warn!(why, writes, "a group commit wrote nothing");
        // Undo whatever is still open; "no transaction is active" if SQLite already rolled back.
        let _ = Sqlite::execute(&mut *conn, sqlx::query("ROLLBACK")).await;
    }
    for ran in ran {
        (ran.acknowledge)(committed.clone(), ran.undone_alone);
    }
    committed.is_ok()
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

    /// A write's signature, as the tests' writes spell it.
    trait TestWrite<T>: for<'c> FnOnce(Opening<'c>) -> BoxFuture<'c, Result<T, StoreError>> {}

    impl<T, F> TestWrite<T> for F where
        F: for<'c> FnOnce(Opening<'c>) -> BoxFuture<'c, Result<T, StoreError>>
    {
    }

    fn insert(id: i64) -> impl TestWrite<u64> {
        move |opening| {
            Box::pin(async move {
                // Two statements, so a failing second one must undo the first.
                let (_, conn) = opening
                    .fetch_all("INSERT INTO t VALUES (?1 + 100000, 'first')", |sql| {
                        sqlx::query(sql).bind(id)
                    })
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
        let writer = GroupCommit::start(&pool);
        for round in 0..20 {
            let ids = (1..=40).map(|n| round * 100 + n);
            // Id 7 of round 0 collides with the seeded row: that write fails.
            let replies = join_all(ids.map(|id| writer.write(insert(id)))).await;
            let failed = replies.iter().filter(|reply| reply.is_err()).count();
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
    async fn a_write_is_replied_to_only_once_it_is_committed() {
        let (_dir, pool) = scratch_database().await;
        let writer = GroupCommit::start(&pool);
        for round in 0..50 {
            let ids = (1..=8).map(|n| round * 10 + n);
            let writes = ids.map(|id| {
                let (writer, pool) = (writer.clone(), pool.clone());
                async move {
                    writer.write(insert(id)).await.expect("written");
                    // Another connection sees it the moment the reply arrives.
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

    /// A write that holds the writer until `let_go` fires, so that the writes sent meanwhile
    /// queue up and are taken as the next batch, together.
    fn holding_the_writer(let_go: oneshot::Receiver<()>) -> impl TestWrite<()> {
        move |opening| {
            Box::pin(async move {
                let _ = let_go.await;
                opening.fetch_all("SELECT 1", sqlx::query).await?;
                Ok(())
            })
        }
    }

    /// The ways a write can end the batch's transaction under the writer's feet, as SQLite does
    /// itself on SQLITE_FULL, IOERR or NOMEM.
    #[derive(Debug, Clone, Copy)]
    enum RolledBack {
        /// The transaction is rolled back and the write fails: its undo then fails too.
        WriteFails,
        /// The transaction is rolled back and the write reports success: closing its savepoint
        /// then fails.
        WriteSucceeds,
        /// The transaction is rolled back and a savepoint opened outside it (a transaction of
        /// its own): only the release of the writer's savepoint, whose name the write cannot
        /// know, sees that the batch's transaction is gone.
        SavepointHidesIt,
    }

    fn breaking(how: RolledBack) -> impl TestWrite<u64> {
        move |opening| {
            Box::pin(async move {
                let (_, conn) = opening
                    .fetch_all("INSERT INTO t VALUES (555, 'doomed')", sqlx::query)
                    .await?;
                Sqlite::execute(&mut *conn, sqlx::query("ROLLBACK")).await?;
                match how {
                    RolledBack::WriteFails => Err(StoreError::Corrupt("disk full".into())),
                    RolledBack::WriteSucceeds => Ok(1),
                    RolledBack::SavepointHidesIt => {
                        Sqlite::execute(conn, sqlx::query("SAVEPOINT one_write")).await?;
                        Ok(1)
                    }
                }
            })
        }
    }

    /// A test's write, boxed, so that writes of different kinds go in one list.
    type Boxed =
        Box<dyn for<'c> FnOnce(Opening<'c>) -> BoxFuture<'c, Result<u64, StoreError>> + Send>;

    /// Sends `writes` while the writer is held, a few milliseconds apart so that they queue in
    /// that order, then frees the writer, so they go as one batch; their replies, in order.
    async fn as_one_batch(
        writer: &GroupCommit,
        writes: Vec<Boxed>,
    ) -> Vec<Result<u64, StoreError>> {
        let (let_go, held) = oneshot::channel();
        let holding = tokio::spawn({
            let writer = writer.clone();
            async move { writer.write(holding_the_writer(held)).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        let mut sent = Vec::new();
        for write in writes {
            let writer = writer.clone();
            sent.push(tokio::spawn(async move { writer.write(write).await }));
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        let_go.send(()).expect("the holding write waits");
        holding
            .await
            .expect("joins")
            .expect("the holding write commits");
        let mut replies = Vec::new();
        for write in sent {
            replies.push(write.await.expect("joins"));
        }
        replies
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_batch_whose_transaction_ends_under_it_commits_nothing_and_tells_every_caller() {
        let (_dir, pool) = scratch_database().await;
        let writer = GroupCommit::start(&pool);
        for round in 0..10 {
            for how in [
                RolledBack::WriteFails,
                RolledBack::WriteSucceeds,
                RolledBack::SavepointHidesIt,
            ] {
                let writes: Vec<Boxed> = vec![
                    Box::new(insert(round * 10 + 1)),
                    Box::new(breaking(how)),
                    Box::new(insert(round * 10 + 2)),
                ];
                let replies = as_one_batch(&writer, writes).await;
                for (which, reply) in [("first", &replies[0]), ("third", &replies[2])] {
                    assert!(
                        matches!(reply, Err(StoreError::Unavailable(_))),
                        "{how:?}, round {round}: the {which} write is told it was not written: {reply:?}"
                    );
                }
                assert!(replies[1].is_err(), "{how:?}: the breaking write");
                assert_eq!(
                    count(&pool).await,
                    0,
                    "{how:?}, round {round}: nothing committed"
                );
            }
        }
        // The writer goes on, on a fresh connection.
        writer.write(insert(9_999)).await.expect("written");
        assert_eq!(count(&pool).await, 2);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_batch_whose_transaction_cannot_begin_writes_nothing_and_tells_every_caller() {
        let (dir, _) = scratch_database().await;
        // Another process's write lock outlasts this pool's busy timeout.
        let options = SqliteConnectOptions::new()
            .filename(dir.path().join("t.sqlite"))
            .busy_timeout(Duration::from_millis(50));
        let pool = sqlx::sqlite::SqlitePoolOptions::new()
            .connect_with(options)
            .await
            .expect("open");
        let writer = GroupCommit::start(&pool);
        for round in 0..5 {
            let mut holder = pool.acquire().await.expect("a connection");
            Sqlite::execute(&mut *holder, sqlx::query("BEGIN IMMEDIATE"))
                .await
                .expect("the other write lock");
            let replies = join_all((1..=3).map(|n| writer.write(insert(round * 10 + n)))).await;
            for reply in &replies {
                assert!(
                    matches!(reply, Err(StoreError::Unavailable(_))),
                    "round {round}: not written: {reply:?}"
                );
            }
            Sqlite::execute(&mut *holder, sqlx::query("ROLLBACK"))
                .await
                .expect("released");
            drop(holder);
            assert_eq!(count(&pool).await, 0, "round {round}: nothing ran outside");
        }
        writer.write(insert(9_999)).await.expect("written");
        assert_eq!(count(&pool).await, 2);
    }

    /// A write that returns without sending anything: `Ok(0)`, or its own error.
    fn sending_nothing(fails: bool) -> impl TestWrite<u64> {
        move |_opening| {
            Box::pin(async move {
                if fails {
                    Err(StoreError::Corrupt("refused before sending".into()))
                } else {
                    Ok(0)
                }
            })
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_write_that_sends_nothing_changes_nothing_and_its_batch_commits() {
        let (_dir, pool) = scratch_database().await;
        let writer = GroupCommit::start(&pool);
        for round in 0..10 {
            // First in its batch, so the next write must begin the transaction; then after a
            // write, whose savepoint it must neither undo nor close.
            for fails in [false, true] {
                let id = round * 100 + i64::from(fails) * 10;
                let writes: Vec<Boxed> = vec![
                    Box::new(sending_nothing(fails)),
                    Box::new(insert(id + 1)),
                    Box::new(sending_nothing(fails)),
                    Box::new(insert(id + 2)),
                ];
                let replies = as_one_batch(&writer, writes).await;
                for which in [1, 3] {
                    assert_eq!(replies[which].as_ref().ok(), Some(&1), "round {round}");
                }
                for which in [0, 2] {
                    match (&replies[which], fails) {
                        (Ok(0), false) | (Err(StoreError::Corrupt(_)), true) => {}
                        (reply, _) => panic!("round {round}: its own reply: {reply:?}"),
                    }
                }
            }
            let written = (round + 1) * 2 * 4;
            assert_eq!(
                count(&pool).await,
                written,
                "round {round}: both writes stand"
            );
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_writer_that_dies_is_reported_stopped_and_started_again() {
        let (_dir, pool) = scratch_database().await;
        let writer = GroupCommit::start(&pool);
        writer.write(insert(1)).await.expect("written");
        let dying = writer
            .write(|_opening| -> BoxFuture<'_, Result<(), StoreError>> {
                Box::pin(async { panic!("a bug in a write") })
            })
            .await;
        assert!(dying.is_err(), "the dying write is told it was not written");
        let mut polls = 0;
        while writer.health().is_running() && polls < 100 {
            tokio::time::sleep(Duration::from_millis(5)).await;
            polls += 1;
        }
        assert!(!writer.health().is_running(), "stopped until its restart");
        assert_eq!(writer.health().restarts(), 1);
        // Sent while the writer is down: written once it runs again.
        writer
            .write(insert(2))
            .await
            .expect("written after the restart");
        assert!(writer.health().is_running());
        assert_eq!(count(&pool).await, 4);
    }
}
