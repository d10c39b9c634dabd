//! [`ReplayCache`]: finished replies kept in this process's memory, so a retry storm's replays
//! are replied to without a database read (docs/design.md, "Replays from memory").
//!
//! Why it is safe: a key in `done` never changes until it expires (SPEC §5; no write moves a
//! key out of `done`), so a reply read once is the reply every replica would read again.
//! Each replica keeps its own cache and needs no invalidation from the others.
//!
//! What still holds for a cached key, decided by the same [`shared::decide`] as a database read:
//! - **user scope**: entries are addressed by (user, key), never by key alone;
//! - **fingerprint**: a different body under the key is still refused with 422;
//! - **expiry**: an entry lives no longer than its key, whose expiry is written on its row at
//!   the claim (`expires_at`, the same for every replica whatever its policy). An entry is
//!   forgotten at the earlier of two instants, each less [`CLOCK_MARGIN`]: the key's remaining
//!   life *as the database's clock measured it* when the row was read, run down on this
//!   process's monotonic clock; and the row's `expires_at` on this process's wall clock. So the
//!   cache does not rest on one clock alone: a database clock that runs ahead of the monotonic
//!   one is caught by the wall clock (kept by NTP, as the database's is), and a wall clock
//!   stepped back by the monotonic one. A reused key is then claimed afresh in the database and
//!   never meets the old entry.
//!
//! Bounds: `REPLAY_CACHE_MAX_BYTES` (the replies' bodies and headers plus a fixed overhead per
//! entry) and `REPLAY_CACHE_MAX_ENTRIES`. Both are enforced as one weight: each entry weighs at
//! least `max_bytes / max_entries`, so neither bound can be passed. Eviction is moka's
//! (TinyLFU admission, LRU eviction); an evicted reply is read from the database on its next
//! replay and remembered again. `REPLAY_CACHE_MAX_BYTES=0` turns the cache off.
//!
//! **The same bytes again.** An entry also keeps the [`SentBytes`] of the first repeat it
//! replayed after the full checks (the body parsed, its canonical fingerprint matched). A later
//! repeat that sends those very bytes, to the same operation and path, would pass the same
//! checks and fingerprint the same, so it is judged on the remembered fingerprint without its
//! body being parsed again (`flows::memory`, `Memory::recall_same_bytes`): parsing and
//! fingerprinting the body were the largest part of a replay's own work (docs/figures.md).

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use moka::Expiry;
use moka::sync::Cache;
use shared::fingerprint::SentBytes;
use shared::{KeyState, Operation, StoredRecord, UserId};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::config::limits::CacheBounds;
use crate::domain::Reply;
use crate::store::{KeyRef, StoredKey};

/// How much earlier than its key an entry is forgotten: room for the monotonic clock and the
/// database's clock to drift apart over a key's life (hours), and for the time between the
/// database reading its clock and this process reading its own.
pub const CLOCK_MARGIN: Duration = Duration::from_secs(1);

/// What an entry costs besides its body and `Location`: the record, the reply's fixed
/// fields, the map's own bookkeeping and the allocator's. Measured with `bench/memory.sh`:
/// with 256 here, 100,000 entries took 400 bytes each more than they weighed; 640 makes the
/// weight match what the process holds.
const ENTRY_OVERHEAD_BYTES: usize = 640;

/// A finished key's reply as remembered, with what the decision needs to judge a repeat.
#[derive(Debug)]
pub struct Remembered {
    /// The key's record as stored (state `done`).
    pub record: StoredRecord,
    /// The operation that claimed the key.
    pub operation: Operation,
    /// The claim's payment or refund (for the audit trail).
    pub movement_id: Uuid,
    /// The saved reply, not marked as a replay.
    pub reply: Reply,
    /// The database's clock when the row was read.
    read_at: OffsetDateTime,
    /// This process's monotonic clock at the same moment.
    read: Instant,
    /// How long the entry may live: the key's remaining life less [`CLOCK_MARGIN`].
    lives_for: Duration,
    /// The bytes of the first repeat replayed after the full checks.
    replayed_bytes: OnceLock<SentBytes>,
}

impl Remembered {
    /// Whether this process's wall clock says the key is (within [`CLOCK_MARGIN`] of being)
    /// expired.
    fn expired_by_the_wall_clock(&self) -> bool {
        OffsetDateTime::now_utc() + CLOCK_MARGIN >= self.record.expires_at
    }
}

impl Remembered {
    /// Keeps `sent` as the bytes of a repeat replayed after the full checks, if no such bytes
    /// are kept yet.
    pub fn note_replayed_bytes(&self, sent: SentBytes) {
        let _ = self.replayed_bytes.set(sent);
    }

    /// Whether `sent` are the bytes of a repeat already replayed after the full checks.
    pub fn replayed_bytes_are(&self, sent: SentBytes) -> bool {
        self.replayed_bytes.get() == Some(&sent)
    }

    /// The database's clock now, as estimated from the read, rounded up by [`CLOCK_MARGIN`] so
    /// that expiry is always judged early rather than late.
    pub fn estimated_now(&self) -> OffsetDateTime {
        self.read_at + self.read.elapsed() + CLOCK_MARGIN
    }

    fn weight(&self) -> usize {
        self.reply.body.len()
            + self.reply.location.as_ref().map_or(0, String::len)
            + ENTRY_OVERHEAD_BYTES
    }
}

/// Finished replies by (user, key). Cheap to clone.
#[derive(Clone)]
pub struct ReplayCache {
    entries: Option<Cache<(UserId, Uuid), Arc<Remembered>>>,
}

impl ReplayCache {
    /// An empty cache within `bounds`.
    pub fn new(bounds: CacheBounds) -> ReplayCache {
        let entries = (bounds.max_bytes > 0 && bounds.max_entries > 0).then(|| {
            let floor = usize::try_from(bounds.max_bytes / bounds.max_entries).unwrap_or(1);
            Cache::builder()
                .max_capacity(bounds.max_bytes)
                .weigher(move |_key, remembered: &Arc<Remembered>| {
                    u32::try_from(remembered.weight().max(floor)).unwrap_or(u32::MAX)
                })
                .expire_after(UntilTheKeyExpires)
                .build()
        });
        ReplayCache { entries }
    }

    /// The remembered reply of `key`, if any and still within its key's life on both clocks.
    pub fn recall(&self, key: KeyRef) -> Option<Arc<Remembered>> {
        let entries = self.entries.as_ref()?;
        let remembered = entries.get(&cache_key(key.clone()))?;
        if remembered.expired_by_the_wall_clock() {
            entries.invalidate(&cache_key(key));
            return None;
        }
        Some(remembered)
    }

    /// Remembers the saved `reply` of a finished key read as `stored`; a key that is not
    /// `done`, or too close to its expiry, is not remembered.
    pub fn remember(&self, key: KeyRef, stored: &StoredKey, reply: &Reply) {
        let Some(entries) = &self.entries else { return };
        if stored.record.state != KeyState::Done {
            return;
        }
        let remaining = stored.record.expires_at - stored.read_at;
        // Negative (already expired) does not convert; nothing left after the margin is skipped.
        let Some(lives_for) = Duration::try_from(remaining)
            .ok()
            .and_then(|remaining| remaining.checked_sub(CLOCK_MARGIN))
            .filter(|lives_for| !lives_for.is_zero())
        else {
            return;
        };
        let remembered = Remembered {
            record: stored.record.clone(),
            operation: stored.operation,
            movement_id: stored.movement_id,
            reply: Reply {
                replayed: false,
                waited: None,
                ..reply.clone()
            },
            read_at: stored.read_at,
            read: Instant::now(),
            lives_for,
            replayed_bytes: OnceLock::new(),
        };
        entries.insert(cache_key(key), Arc::new(remembered));
    }

    /// Forgets `key` (its entry was judged expired, or something other than a replay).
    pub fn forget(&self, key: KeyRef) {
        if let Some(entries) = &self.entries {
            entries.invalidate(&cache_key(key));
        }
    }

    /// Forgets every reply: each is read from the database on its next replay. For tests
    /// that move keys' clocks in the database, where this process's clock cannot follow.
    pub fn forget_all(&self) {
        if let Some(entries) = &self.entries {
            entries.invalidate_all();
        }
    }

    /// How many replies are kept and what they weigh (after pending evictions are applied).
    pub fn usage(&self) -> (u64, u64) {
        self.entries.as_ref().map_or((0, 0), |entries| {
            entries.run_pending_tasks();
            (entries.entry_count(), entries.weighted_size())
        })
    }
}

fn cache_key(key: KeyRef) -> (UserId, Uuid) {
    (key.user, key.key)
}

/// Each entry expires when [`Remembered::lives_for`] has passed since it was remembered.
struct UntilTheKeyExpires;

impl Expiry<(UserId, Uuid), Arc<Remembered>> for UntilTheKeyExpires {
    fn expire_after_create(
        &self,
        _key: &(UserId, Uuid),
        remembered: &Arc<Remembered>,
        _created_at: Instant,
    ) -> Option<Duration> {
        Some(remembered.lives_for)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared::Fingerprint;

    fn key(user: u64) -> KeyRef {
        KeyRef {
            user: UserId::numbered(user),
            key: Uuid::from_u128(7),
        }
    }

    /// A key of `state`, claimed `age` before it was read (now, by the database's clock, which
    /// agrees with this process's), kept a day.
    fn stored(state: KeyState, age: Duration) -> StoredKey {
        let read_at = OffsetDateTime::now_utc();
        kept(state, read_at - age, read_at, DAY)
    }

    /// A key of `state` claimed at `created_at`, read at `read_at` (the database's clock), kept
    /// `life` from its claim.
    fn kept(
        state: KeyState,
        created_at: OffsetDateTime,
        read_at: OffsetDateTime,
        life: Duration,
    ) -> StoredKey {
        StoredKey {
            record: StoredRecord {
                fingerprint: Fingerprint::from_slice(&[1; 32]).expect("32 bytes"),
                state,
                created_at,
                claimed_at: created_at,
                expires_at: created_at + life,
            },
            operation: Operation::PayBill,
            movement_id: Uuid::from_u128(9),
            read_at,
            status_checks: 0,
            settlement_due_at: None,
            saved: None,
        }
    }

    fn reply() -> Reply {
        Reply {
            status: 201,
            content_type: "application/json",
            body: b"{}".to_vec(),
            location: None,
            retry_after: None,
            replayed: true,
            waited: Some(Duration::from_secs(3)),
            expires_at: None,
        }
    }

    const DAY: Duration = Duration::from_secs(86_400);

    #[test]
    fn remembers_a_finished_reply_by_user_and_key() {
        let cache = ReplayCache::new(CacheBounds::default());
        cache.remember(key(1), &stored(KeyState::Done, Duration::ZERO), &reply());
        let remembered = cache.recall(key(1)).expect("remembered");
        assert!(!remembered.reply.replayed && remembered.reply.waited.is_none());
        assert!(cache.recall(key(2)).is_none(), "another user's key");
    }

    #[test]
    fn an_entry_keeps_the_first_replayed_bytes_only() {
        let cache = ReplayCache::new(CacheBounds::default());
        cache.remember(key(1), &stored(KeyState::Done, Duration::ZERO), &reply());
        let remembered = cache.recall(key(1)).expect("remembered");
        let (first, second) = (
            SentBytes::of(Operation::PayBill, "B", b"{}"),
            SentBytes::of(Operation::PayBill, "B", b"{ }"),
        );
        assert!(
            !remembered.replayed_bytes_are(first),
            "none kept before a replay"
        );
        remembered.note_replayed_bytes(first);
        remembered.note_replayed_bytes(second);
        let again = cache.recall(key(1)).expect("remembered");
        assert!(again.replayed_bytes_are(first));
        assert!(!again.replayed_bytes_are(second));
    }

    #[test]
    fn unfinished_keys_and_keys_about_to_expire_are_not_remembered() {
        let cache = ReplayCache::new(CacheBounds::default());
        for state in [KeyState::Started, KeyState::Unknown, KeyState::Released] {
            cache.remember(key(1), &stored(state, Duration::ZERO), &reply());
            assert!(cache.recall(key(1)).is_none(), "{state:?}");
        }
        let last_half_second = DAY - Duration::from_millis(500);
        cache.remember(key(1), &stored(KeyState::Done, last_half_second), &reply());
        assert!(cache.recall(key(1)).is_none());
        cache.remember(key(1), &stored(KeyState::Done, DAY * 2), &reply());
        assert!(cache.recall(key(1)).is_none(), "already expired");
    }

    #[test]
    fn an_entry_lives_no_longer_than_its_key_less_the_margin() {
        let cache = ReplayCache::new(CacheBounds::default());
        let now = OffsetDateTime::now_utc();
        let short_lived = kept(KeyState::Done, now, now, Duration::from_millis(1_300));
        cache.remember(key(1), &short_lived, &reply());
        assert!(cache.recall(key(1)).is_some());
        std::thread::sleep(Duration::from_millis(400));
        assert!(cache.recall(key(1)).is_none(), "1.3 s key, 1 s margin");
    }

    #[test]
    fn the_wall_clock_forgets_a_key_its_row_says_expired_whatever_the_database_clock_read() {
        let cache = ReplayCache::new(CacheBounds::default());
        // The database's clock read 10 s behind this process's when the row was read; by the
        // row, the key expires 5 s after that read, which this process's clock has passed.
        let read_at = OffsetDateTime::now_utc() - Duration::from_secs(10);
        let lagging = kept(KeyState::Done, read_at, read_at, Duration::from_secs(5));
        cache.remember(key(1), &lagging, &reply());
        assert!(cache.recall(key(1)).is_none());
        assert_eq!(cache.usage().0, 0, "and the entry is gone");
    }

    #[test]
    fn the_entry_bound_holds_whatever_the_bytes() {
        let bounds = CacheBounds {
            max_bytes: 1 << 20,
            max_entries: 10,
        };
        let cache = ReplayCache::new(bounds);
        for user in 1..=100 {
            cache.remember(key(user), &stored(KeyState::Done, Duration::ZERO), &reply());
        }
        let (entries, bytes) = cache.usage();
        assert!(entries <= 10, "{entries} entries");
        assert!(bytes <= 1 << 20, "{bytes} bytes");
    }

    #[test]
    fn zero_bytes_turns_the_cache_off() {
        let bounds = CacheBounds {
            max_bytes: 0,
            ..CacheBounds::default()
        };
        let cache = ReplayCache::new(bounds);
        cache.remember(key(1), &stored(KeyState::Done, Duration::ZERO), &reply());
        assert!(cache.recall(key(1)).is_none());
    }
}
