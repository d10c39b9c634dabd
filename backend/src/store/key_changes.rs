//! [`KeyChanges`]: news that a key has left `started`, for the requests waiting on it
//! (`Prefer: wait`, SPEC §4).
//!
//! The store announces every write that moves a key out of `started` (to `done`, `unknown` or
//! `released`) once it has committed. In this process the announcement wakes the key's watchers
//! at once. On PostgreSQL it is also a `NOTIFY` on [`CHANNEL`], sent in the writing
//! transaction (so it is delivered only if the write commits) when the key's row is marked
//! `awaited` (a request waits on it: `Claims::mark_awaited`), and every replica's listener
//! ([`listen_for_changes`]) wakes its own watchers, so a retry parked on one replica hears of an
//! reply saved by another. Notifications are not durable: one sent while a listener is
//! reconnecting is lost, so a listener that reconnects wakes every watcher to look again, and a
//! watcher never waits longer than its caller's poll interval between looks anyway.
//!
//! A watch is taken *before* the key is read again, so a change that commits between that read
//! and the wait still wakes it. Dropping a [`KeyWatch`] (the waiting request replied, timed
//! out or lost its client) removes it: nothing is left behind.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgListener;
use tokio::sync::oneshot;
use uuid::Uuid;

use shared::UserId;

use super::types::KeyRef;

/// The PostgreSQL channel on which key changes are announced. The payload is the user id and
/// the stored key, separated by a space.
pub const CHANNEL: &str = "idempotency_key_changed";

/// How long a listener whose connection failed waits before connecting again.
const RECONNECT_PAUSE: Duration = Duration::from_secs(1);

/// A key as its watchers are filed.
type WatchedKey = (UserId, Uuid);

/// The watchers of every key, in this process.
#[derive(Debug, Default)]
pub struct KeyChanges {
    watchers: Mutex<HashMap<WatchedKey, Vec<Watcher>>>,
    next_watcher: AtomicU64,
}

#[derive(Debug)]
struct Watcher {
    id: u64,
    wake: oneshot::Sender<()>,
}

/// One request's watch on one key: resolves when the key is announced changed.
#[derive(Debug)]
pub struct KeyWatch {
    changes: Arc<KeyChanges>,
    key: WatchedKey,
    id: u64,
    woken: oneshot::Receiver<()>,
}

impl KeyChanges {
    /// Starts watching `key`.
    pub fn watch(self: &Arc<Self>, key: KeyRef) -> KeyWatch {
        let (wake, woken) = oneshot::channel();
        let id = self.next_watcher.fetch_add(1, Ordering::Relaxed);
        let watched = watched(key);
        self.lock()
            .entry(watched.clone())
            .or_default()
            .push(Watcher { id, wake });
        KeyWatch {
            changes: Arc::clone(self),
            key: watched,
            id,
            woken,
        }
    }

    /// Wakes every watcher of `key`.
    pub fn announce(&self, key: KeyRef) {
        self.wake_watchers_of(watched(key));
    }

    /// Wakes every watcher of every key: changes may have been missed.
    pub fn announce_all(&self) {
        let all = std::mem::take(&mut *self.lock());
        for watcher in all.into_values().flatten() {
            let _ = watcher.wake.send(());
        }
    }

    /// How many watches are open.
    pub fn watching(&self) -> usize {
        self.lock().values().map(Vec::len).sum()
    }

    fn wake_watchers_of(&self, key: WatchedKey) {
        let watchers = self.lock().remove(&key).unwrap_or_default();
        for watcher in watchers {
            // A watcher whose request has gone is simply not there to hear it.
            let _ = watcher.wake.send(());
        }
    }

    fn forget(&self, key: WatchedKey, id: u64) {
        let mut watchers = self.lock();
        if let Some(of_key) = watchers.get_mut(&key) {
            of_key.retain(|watcher| watcher.id != id);
            if of_key.is_empty() {
                watchers.remove(&key);
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<WatchedKey, Vec<Watcher>>> {
        // The map stays consistent whatever panicked while holding it: each step is one
        // insert or removal.
        self.watchers.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl KeyWatch {
    /// Waits until the key is announced changed, or `at_most` has passed; `true` if it was
    /// announced.
    pub async fn changed_within(&mut self, at_most: Duration) -> bool {
        matches!(
            tokio::time::timeout(at_most, &mut self.woken).await,
            Ok(Ok(()))
        )
    }
}

impl Drop for KeyWatch {
    fn drop(&mut self) {
        self.changes.forget(self.key.clone(), self.id);
    }
}

fn watched(key: KeyRef) -> WatchedKey {
    (key.user, key.key)
}

/// The `NOTIFY` payload naming `key`.
pub fn payload(key: KeyRef) -> String {
    format!("{} {}", key.user, key.key)
}

fn parse_payload(payload: &str) -> Option<WatchedKey> {
    // A subject has no space (SPEC §3), so the first space ends it.
    let (user, key) = payload.split_once(' ')?;
    Some((UserId::from_subject(user).ok()?, key.parse().ok()?))
}

/// Listens on [`CHANNEL`] for as long as the process runs, on a connection of its own (built
/// from `pool`'s options, so it never takes one of the requests' connections), waking this
/// process's watchers of each key announced. After a lost connection it wakes every watcher,
/// since announcements may have been missed, and connects again.
pub async fn listen_for_changes(pool: PgPool, changes: Arc<KeyChanges>) {
    loop {
        if let Err(error) = listen(&pool, &changes).await {
            tracing::warn!(
                error = %error,
                "key change listener lost its connection; waiting requests look again"
            );
        }
        changes.announce_all();
        tokio::time::sleep(RECONNECT_PAUSE).await;
    }
}

async fn listen(pool: &PgPool, changes: &KeyChanges) -> Result<(), sqlx::Error> {
    let own_connection = sqlx::postgres::PgPoolOptions::new()
        .max_connections(1)
        .connect_lazy_with(pool.connect_options().as_ref().clone());
    let mut listener = PgListener::connect_with(&own_connection).await?;
    listener.listen(CHANNEL).await?;
    // Anything announced before the LISTEN took effect was missed.
    changes.announce_all();
    while let Some(notification) = listener.try_recv().await? {
        match parse_payload(notification.payload()) {
            Some(key) => changes.wake_watchers_of(key),
            None => tracing::warn!(
                payload = notification.payload(),
                "unreadable key change notification"
            ),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use shared::{IdempotencyKey, UserId};

    use super::*;

    fn key(user: u64) -> KeyRef {
        let key = IdempotencyKey::mint();
        KeyRef::new(UserId::numbered(user), &key)
    }

    #[tokio::test]
    async fn an_announcement_wakes_every_watcher_of_the_key_and_no_other() {
        let changes = Arc::new(KeyChanges::default());
        let (mine, other) = (key(1), key(1));
        let mut first = changes.watch(mine.clone());
        let mut second = changes.watch(mine.clone());
        let mut elsewhere = changes.watch(other);
        changes.announce(mine.clone());
        assert!(first.changed_within(Duration::from_secs(1)).await);
        assert!(second.changed_within(Duration::from_secs(1)).await);
        assert!(!elsewhere.changed_within(Duration::from_millis(20)).await);
        assert_eq!(changes.watching(), 1, "woken watchers are gone");
    }

    #[tokio::test]
    async fn a_dropped_watch_leaves_nothing_behind() {
        let changes = Arc::new(KeyChanges::default());
        let watches: Vec<KeyWatch> = (0..5).map(|_| changes.watch(key(2))).collect();
        assert_eq!(changes.watching(), 5);
        drop(watches);
        assert_eq!(changes.watching(), 0);
        assert!(changes.lock().is_empty());
    }

    #[tokio::test]
    async fn announcing_all_wakes_everyone() {
        let changes = Arc::new(KeyChanges::default());
        let mut watches: Vec<KeyWatch> = (0..3).map(|n| changes.watch(key(n + 1))).collect();
        changes.announce_all();
        for watch in &mut watches {
            assert!(watch.changed_within(Duration::from_secs(1)).await);
        }
    }

    #[test]
    fn payloads_name_user_and_key() {
        let mine = key(42);
        assert_eq!(parse_payload(&payload(mine.clone())), Some(watched(mine)));
        for bad in ["", "42", "x 1", "42 not-a-uuid"] {
            assert_eq!(parse_payload(bad), None, "{bad}");
        }
    }
}
