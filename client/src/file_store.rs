//! [`FileStore`], the default [`ActionStore`]: a directory with one JSON file per action, named
//! after its key.
//!
//! A save is atomic and durable: the JSON goes to a temporary file in the same directory, which
//! is fsynced, renamed over the final name, and the directory is fsynced so the rename itself
//! survives a power cut. A reader sees the whole action or none of it; a temporary file left by
//! a crash mid-save is not an action (it was never sent) and is ignored.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use shared::IdempotencyKey;

use crate::action_store::{ActionStore, SavedAction, StoreError};

/// A directory of pending actions, one JSON file each. Cheap to clone (a path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStore {
    dir: PathBuf,
}

/// Saved actions end in this; temporary files start with a dot and end in `.tmp`.
const EXTENSION: &str = "json";

impl FileStore {
    /// Opens the store in `dir`, creating the directory if needed.
    pub fn open(dir: impl Into<PathBuf>) -> Result<FileStore, StoreError> {
        let dir = dir.into();
        fs::create_dir_all(&dir).map_err(|source| StoreError::Write {
            path: dir.clone(),
            source,
        })?;
        Ok(FileStore { dir })
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Makes renames and deletions in the directory durable.
    fn sync_dir(&self) -> Result<(), StoreError> {
        File::open(&self.dir)
            .and_then(|dir| dir.sync_all())
            .map_err(|source| StoreError::Write {
                path: self.dir.clone(),
                source,
            })
    }
}

impl ActionStore for FileStore {
    /// Writes `saved` atomically and durably: when this returns `Ok`, the action survives a
    /// crash or a power cut.
    fn save(&self, saved: &SavedAction) -> Result<(), StoreError> {
        let name = file_stem(saved.key());
        let final_path = self.dir.join(format!("{name}.{EXTENSION}"));
        let temporary = self.dir.join(format!(".{name}.{EXTENSION}.tmp"));
        let json = serde_json::to_vec_pretty(saved).expect("a saved action always serialises");
        let write = |path: &Path| {
            let mut file = File::create(path)?;
            file.write_all(&json)?;
            file.sync_all()
        };
        write(&temporary).map_err(|source| StoreError::Write {
            path: temporary.clone(),
            source,
        })?;
        fs::rename(&temporary, &final_path).map_err(|source| StoreError::Write {
            path: final_path.clone(),
            source,
        })?;
        self.sync_dir()
    }

    /// Every saved action, oldest first.
    fn load_all(&self) -> Result<Vec<SavedAction>, StoreError> {
        let read_error = |source| StoreError::Read {
            path: self.dir.clone(),
            source,
        };
        let mut actions = Vec::new();
        for entry in fs::read_dir(&self.dir).map_err(read_error)? {
            let path = entry.map_err(read_error)?.path();
            let is_action = path.extension().is_some_and(|ext| ext == EXTENSION)
                && !path
                    .file_name()
                    .is_some_and(|name| name.to_string_lossy().starts_with('.'));
            if is_action {
                actions.push(load(&path)?);
            }
        }
        actions.sort_by_key(SavedAction::started_at);
        Ok(actions)
    }

    /// Removes the action with `key` (its final reply is known); no error if it is gone.
    fn forget(&self, key: &IdempotencyKey) -> Result<(), StoreError> {
        let path = self.dir.join(format!("{}.{EXTENSION}", file_stem(key)));
        match fs::remove_file(&path) {
            Ok(()) => self.sync_dir(),
            Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(StoreError::Write { path, source }),
        }
    }
}

/// The file name of a key: its storage UUID, safe on every file system whatever the key holds.
fn file_stem(key: &IdempotencyKey) -> String {
    key.storage_uuid().hyphenated().to_string()
}

fn load(path: &Path) -> Result<SavedAction, StoreError> {
    let bytes = fs::read(path).map_err(|source| StoreError::Read {
        path: path.to_owned(),
        source,
    })?;
    serde_json::from_slice(&bytes).map_err(|source| StoreError::Corrupt {
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use time::OffsetDateTime;

    use super::*;
    use crate::test_support::{TempDir, pay_action, user};

    #[test]
    fn a_saved_action_reads_back_identical_through_a_new_store_handle() {
        let dir = TempDir::new();
        let saved = SavedAction::new(user(7), pay_action(230_000), OffsetDateTime::now_utc());
        FileStore::open(dir.path())
            .expect("opens")
            .save(&saved)
            .expect("saves");

        let reopened = FileStore::open(dir.path()).expect("reopens");
        let loaded = reopened.load_all().expect("loads");
        assert_eq!(loaded, std::slice::from_ref(&saved));
        assert_eq!(loaded[0].key(), saved.key());
        assert_eq!(loaded[0].action().body(), saved.action().body());
    }

    #[test]
    fn a_save_leaves_exactly_one_file_and_forget_removes_it() {
        let dir = TempDir::new();
        let store = FileStore::open(dir.path()).expect("opens");
        let saved = SavedAction::new(user(7), pay_action(100), OffsetDateTime::now_utc());
        store.save(&saved).expect("saves");
        let names: Vec<String> = fs::read_dir(dir.path())
            .expect("lists")
            .map(|entry| {
                entry
                    .expect("entry")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        assert_eq!(names, [format!("{}.json", saved.key())]);

        store.forget(saved.key()).expect("forgets");
        store.forget(saved.key()).expect("forgetting twice is fine");
        assert!(store.load_all().expect("loads").is_empty());
    }

    #[test]
    fn a_temporary_file_of_an_interrupted_save_is_not_an_action() {
        let dir = TempDir::new();
        let store = FileStore::open(dir.path()).expect("opens");
        fs::write(
            dir.path().join(".half-written.json.tmp"),
            b"{\"user\": 7, \"sta",
        )
        .expect("writes");
        assert!(store.load_all().expect("loads").is_empty());
    }

    #[test]
    fn a_corrupt_file_is_reported_not_skipped() {
        let dir = TempDir::new();
        let store = FileStore::open(dir.path()).expect("opens");
        fs::write(dir.path().join("edited.json"), b"not json").expect("writes");
        assert!(matches!(store.load_all(), Err(StoreError::Corrupt { .. })));
    }

    #[test]
    fn actions_load_oldest_first() {
        let dir = TempDir::new();
        let store = FileStore::open(dir.path()).expect("opens");
        let now = OffsetDateTime::now_utc();
        let newer = SavedAction::new(user(7), pay_action(1), now);
        let older = SavedAction::new(user(7), pay_action(2), now - time::Duration::minutes(3));
        store.save(&newer).expect("saves");
        store.save(&older).expect("saves");
        assert_eq!(store.load_all().expect("loads"), [older, newer]);
    }
}
