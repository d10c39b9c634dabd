//! Where pending actions are kept: [`ActionStore`], a trait, so an app keeps them where it keeps
//! its data; [`crate::FileStore`] (a directory, one file per action, written atomically and
//! durably) is the default, and [`MemoryStore`] keeps them for the life of the process only (tests,
//! tools). An action is written *before* its first send and removed at its final reply, so
//! whatever happens in between (a crash, a killed app, a reboot) the next start finds the same
//! key and the same body bytes and carries on with them instead of minting a new key.

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use serde::{Deserialize, Serialize};
use shared::retry::PendingAction;
use shared::{IdempotencyKey, UserId};
use thiserror::Error;
use time::OffsetDateTime;

/// A pending action as saved: who started it, when (its deadline counts from here, across
/// restarts), and the action itself with its key and frozen body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedAction {
    /// The user whose token sends it: a key is only meaningful together with its user.
    user: UserId,
    /// When the user started the action, just before its first send.
    #[serde(with = "time::serde::rfc3339")]
    started_at: OffsetDateTime,
    /// The key, the operation, its target and the exact body.
    action: PendingAction,
}

impl SavedAction {
    /// A saved action (not yet written): `action` for `user`, started at `started_at`.
    pub fn new(user: UserId, action: PendingAction, started_at: OffsetDateTime) -> SavedAction {
        SavedAction {
            user,
            started_at,
            action,
        }
    }

    /// The user it belongs to.
    pub fn user(&self) -> UserId {
        self.user.clone()
    }

    /// When it was started.
    pub fn started_at(&self) -> OffsetDateTime {
        self.started_at
    }

    /// The action: key, operation, target, body.
    pub fn action(&self) -> &PendingAction {
        &self.action
    }

    /// Its key.
    pub fn key(&self) -> &IdempotencyKey {
        self.action.key()
    }
}

/// A store operation that failed. A failed save means the action must not be sent.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Writing, renaming, syncing or deleting failed.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file or directory.
        path: PathBuf,
        /// The system's error.
        source: io::Error,
    },
    /// Listing or reading failed.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// The system's error.
        source: io::Error,
    },
    /// A file in the store is not a saved action (edited by hand, or written by another program).
    #[error("{path} is not a saved action: {source}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What the JSON parser said.
        source: serde_json::Error,
    },
    /// The background task doing the file work was lost (the runtime is shutting down).
    #[error("the store's file task did not finish: {0}")]
    Interrupted(String),
    /// Another store's own failure, in its words.
    #[error("the store failed: {0}")]
    Other(String),
}

/// Keeps pending actions until their final reply. `save` must be durable when it returns `Ok`
/// (the action is sent only then); the calls may block (the client runs them off its async
/// threads).
pub trait ActionStore: fmt::Debug + Send + Sync + 'static {
    /// Saves `saved`, replacing an action with the same key.
    fn save(&self, saved: &SavedAction) -> Result<(), StoreError>;
    /// Every saved action, oldest first.
    fn load_all(&self) -> Result<Vec<SavedAction>, StoreError>;
    /// Removes the action with `key`; no error if it is gone.
    fn forget(&self, key: &IdempotencyKey) -> Result<(), StoreError>;
}

/// Actions kept in memory: they do not survive the process, so an app must not use it for real
/// payments; tests and tools that start and finish their actions in one run can.
#[derive(Debug, Default)]
pub struct MemoryStore {
    actions: Mutex<HashMap<IdempotencyKey, SavedAction>>,
}

impl MemoryStore {
    fn actions(&self) -> std::sync::MutexGuard<'_, HashMap<IdempotencyKey, SavedAction>> {
        self.actions.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl ActionStore for MemoryStore {
    fn save(&self, saved: &SavedAction) -> Result<(), StoreError> {
        self.actions().insert(saved.key().clone(), saved.clone());
        Ok(())
    }

    fn load_all(&self) -> Result<Vec<SavedAction>, StoreError> {
        let mut actions: Vec<SavedAction> = self.actions().values().cloned().collect();
        actions.sort_by_key(|saved| saved.started_at);
        Ok(actions)
    }

    fn forget(&self, key: &IdempotencyKey) -> Result<(), StoreError> {
        self.actions().remove(key);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{pay_action, user};

    #[test]
    fn the_memory_store_keeps_actions_oldest_first_until_forgotten() {
        let store = MemoryStore::default();
        let now = OffsetDateTime::now_utc();
        let newer = SavedAction::new(user(7), pay_action(1), now);
        let older = SavedAction::new(user(7), pay_action(2), now - time::Duration::minutes(3));
        store.save(&newer).expect("saves");
        store.save(&older).expect("saves");
        store.save(&older).expect("saving again replaces");
        assert_eq!(store.load_all().expect("loads"), [older.clone(), newer]);
        store.forget(older.key()).expect("forgets");
        store.forget(older.key()).expect("forgetting twice is fine");
        assert_eq!(store.load_all().expect("loads").len(), 1);
    }
}
