//! The bounds that keep one backend replying under load and abuse, as settings
//! ([`LimitSettings`]: flags and environment) and as the values the application runs with
//! ([`Limits`]), with the replay cache's ([`CacheBounds`]) and the reconciler's
//! ([`ReconcileBounds`]) among them. Here rather than beside the parts they bound, so that the
//! configuration depends on none of those parts.

use std::time::Duration;

use anyhow::bail;
use clap::Args;

/// The bounds as read from flags and environment, in milliseconds and counts.
#[derive(Debug, Clone, Args)]
pub struct LimitSettings {
    /// An API request's reply deadline in milliseconds (503 past it); longer than
    /// `BANK_TIMEOUT_MS`, and at least a second longer than the policy's `max_wait_seconds`.
    #[arg(long, env = "REQUEST_TIMEOUT_MS", default_value_t = 12_000)]
    pub request_timeout_ms: u64,
    /// How long a request's head may take to arrive, and an idle connection stay open, in
    /// milliseconds: closed past it.
    #[arg(long, env = "HEAD_READ_TIMEOUT_MS", default_value_t = 10_000)]
    pub head_read_timeout_ms: u64,
    /// How long a request body may take to arrive, in milliseconds (408 `body-timeout` past it,
    /// nothing claimed).
    #[arg(long, env = "BODY_READ_TIMEOUT_MS", default_value_t = 5_000)]
    pub body_read_timeout_ms: u64,
    /// API requests served at once; more are shed at once with 503 and `Retry-After`.
    #[arg(long, env = "MAX_CONCURRENT_REQUESTS", default_value_t = 256)]
    pub max_concurrent_requests: usize,
    /// Of those, requests waiting at once for their key's first attempt (`Prefer: wait`); fewer
    /// than `MAX_CONCURRENT_REQUESTS`; past it, 409 at once.
    #[arg(long, env = "MAX_WAITING_REQUESTS", default_value_t = 128)]
    pub max_waiting_requests: usize,
    /// Money-moving calls to the bank in flight at once (payments, refunds): with
    /// `MAX_BANK_LOOKUPS`, the bound the partner bank agreed to.
    #[arg(long, env = "MAX_BANK_CALLS", default_value_t = 64)]
    pub max_bank_calls: usize,
    /// Status look-ups at the bank in flight at once (reconciliation, the look-up after a call
    /// the bank did not execute, operators' ledger checks): a bound of their own, so look-ups
    /// and money-moving calls never starve each other.
    #[arg(long, env = "MAX_BANK_LOOKUPS", default_value_t = 16)]
    pub max_bank_lookups: usize,
    /// How long a claimed payment waits for a free bank call, in milliseconds, before its claim
    /// is released and it replies 503.
    #[arg(long, env = "BANK_QUEUE_WAIT_MS", default_value_t = 1_000)]
    pub bank_queue_wait_ms: u64,
    /// Bytes of memory for finished replies, replayed without a database read (docs/design.md,
    /// "Replays from memory"); 0 turns the cache off.
    #[arg(long, env = "REPLAY_CACHE_MAX_BYTES", default_value_t = CacheBounds::default().max_bytes)]
    pub replay_cache_max_bytes: u64,
    /// The most finished replies kept in memory.
    #[arg(long, env = "REPLAY_CACHE_MAX_ENTRIES", default_value_t = CacheBounds::default().max_entries)]
    pub replay_cache_max_entries: u64,
    /// Bank look-ups the reconciler runs at once, per replica (they count against
    /// `MAX_BANK_LOOKUPS` too).
    #[arg(long, env = "RECONCILE_CONCURRENCY", default_value_t = ReconcileBounds::default().concurrency)]
    pub reconcile_concurrency: usize,
    /// The most look-ups the reconciler starts per second, per replica, to spare the bank while a
    /// backlog drains.
    #[arg(long, env = "RECONCILE_MAX_LOOKUPS_PER_SECOND", default_value_t = ReconcileBounds::default().lookups_per_second)]
    pub reconcile_max_lookups_per_second: u32,
}

/// The bounds that keep one backend replying under load and abuse (docs/design.md, "Limits
/// and load shedding"): every request has a deadline, a body must arrive in time, requests
/// beyond a number are shed at once with 503 rather than queued into timeouts, and the bank
/// never gets more than a number of calls at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// An API request's reply deadline: past it, 503 (claimed work goes on in its task).
    pub request_timeout: Duration,
    /// How long a request head may take to arrive, and an idle connection may stay open: past
    /// it, the connection is closed.
    pub head_read_timeout: Duration,
    /// How long a request body may take to arrive: past it, 408, nothing claimed.
    pub body_read_timeout: Duration,
    /// API requests served at once; more get 503 at once.
    pub max_concurrent_requests: usize,
    /// Of those, requests waiting at once for their key's first attempt.
    pub max_waiting_requests: usize,
    /// Money-moving calls to the bank in flight at once (payments, refunds).
    pub max_bank_calls: usize,
    /// Status look-ups at the bank in flight at once.
    pub max_bank_lookups: usize,
    /// How long a claimed payment or refund waits for a free bank call before its claim is
    /// released (nothing was sent) and the request gets 503.
    pub bank_queue_wait: Duration,
    /// The memory for finished replies replayed without a database read.
    pub replay_cache: CacheBounds,
    /// How hard the reconciler may drain a backlog.
    pub reconcile: ReconcileBounds,
}

impl Default for Limits {
    /// The defaults of the settings.
    fn default() -> Self {
        Limits {
            request_timeout: Duration::from_secs(12),
            head_read_timeout: Duration::from_secs(10),
            body_read_timeout: Duration::from_secs(5),
            max_concurrent_requests: 256,
            max_waiting_requests: 128,
            max_bank_calls: 64,
            max_bank_lookups: 16,
            bank_queue_wait: Duration::from_secs(1),
            replay_cache: CacheBounds::default(),
            reconcile: ReconcileBounds::default(),
        }
    }
}

impl LimitSettings {
    /// The checked bounds: none may be zero, a request's deadline must outlast a bank call and
    /// leave a second after the longest wait (`max_wait`), and waiting requests must leave
    /// places for the rest.
    pub(super) fn into_limits(
        self,
        bank_timeout: Duration,
        max_wait: Duration,
    ) -> anyhow::Result<Limits> {
        let limits = Limits {
            request_timeout: Duration::from_millis(self.request_timeout_ms),
            head_read_timeout: Duration::from_millis(self.head_read_timeout_ms),
            body_read_timeout: Duration::from_millis(self.body_read_timeout_ms),
            max_concurrent_requests: self.max_concurrent_requests,
            max_waiting_requests: self.max_waiting_requests,
            max_bank_calls: self.max_bank_calls,
            max_bank_lookups: self.max_bank_lookups,
            bank_queue_wait: Duration::from_millis(self.bank_queue_wait_ms),
            replay_cache: CacheBounds {
                max_bytes: self.replay_cache_max_bytes,
                max_entries: self.replay_cache_max_entries,
            },
            reconcile: ReconcileBounds {
                concurrency: self.reconcile_concurrency,
                lookups_per_second: self.reconcile_max_lookups_per_second,
            },
        };
        for (setting, zero) in [
            ("REQUEST_TIMEOUT_MS", limits.request_timeout.is_zero()),
            ("HEAD_READ_TIMEOUT_MS", limits.head_read_timeout.is_zero()),
            ("BODY_READ_TIMEOUT_MS", limits.body_read_timeout.is_zero()),
            (
                "MAX_CONCURRENT_REQUESTS",
                limits.max_concurrent_requests == 0,
            ),
            ("MAX_WAITING_REQUESTS", limits.max_waiting_requests == 0),
            ("MAX_BANK_CALLS", limits.max_bank_calls == 0),
            ("MAX_BANK_LOOKUPS", limits.max_bank_lookups == 0),
            ("BANK_QUEUE_WAIT_MS", limits.bank_queue_wait.is_zero()),
            (
                "REPLAY_CACHE_MAX_ENTRIES",
                limits.replay_cache.max_entries == 0,
            ),
            ("RECONCILE_CONCURRENCY", limits.reconcile.concurrency == 0),
            (
                "RECONCILE_MAX_LOOKUPS_PER_SECOND",
                limits.reconcile.lookups_per_second == 0,
            ),
        ] {
            if zero {
                bail!("{setting} must be above 0");
            }
        }
        if limits.request_timeout <= bank_timeout {
            bail!(
                "REQUEST_TIMEOUT_MS ({} ms) must be longer than BANK_TIMEOUT_MS ({} ms)",
                limits.request_timeout.as_millis(),
                bank_timeout.as_millis()
            );
        }
        if limits.request_timeout < max_wait + Duration::from_secs(1) {
            bail!(
                "REQUEST_TIMEOUT_MS ({} ms) must be at least a second longer than the policy's \
                 max_wait_seconds ({} s), so a request that waited still has time to reply",
                limits.request_timeout.as_millis(),
                max_wait.as_secs()
            );
        }
        if limits.max_waiting_requests >= limits.max_concurrent_requests {
            bail!(
                "MAX_WAITING_REQUESTS ({}) must be fewer than MAX_CONCURRENT_REQUESTS ({}), so \
                 waiting requests never take every place",
                limits.max_waiting_requests,
                limits.max_concurrent_requests
            );
        }
        Ok(limits)
    }
}

/// The cache's bounds (`REPLAY_CACHE_MAX_BYTES`, `REPLAY_CACHE_MAX_ENTRIES`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheBounds {
    /// The most bytes the cached replies may take; 0 turns the cache off.
    pub max_bytes: u64,
    /// The most replies kept.
    pub max_entries: u64,
}

impl Default for CacheBounds {
    /// 64 MiB and 200,000 replies: a payment's reply weighs about 870 bytes (its body and
    /// `Location` plus the replay cache's fixed overhead per entry), so about 77,000 payments' replies fit; the
    /// entry bound (a floor weight of 335 bytes) only binds for smaller replies.
    fn default() -> Self {
        CacheBounds {
            max_bytes: 64 << 20,
            max_entries: 200_000,
        }
    }
}

/// How hard the reconciler may drain a backlog (`RECONCILE_CONCURRENCY`,
/// `RECONCILE_MAX_LOOKUPS_PER_SECOND`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReconcileBounds {
    /// Look-ups in flight at once, on this replica.
    pub concurrency: usize,
    /// Look-ups started per second at most, on this replica.
    pub lookups_per_second: u32,
}

impl Default for ReconcileBounds {
    /// 16 at once (a quarter of the default `MAX_BANK_CALLS`), at most 1,000 a second.
    fn default() -> Self {
        ReconcileBounds {
            concurrency: 16,
            lookups_per_second: 1_000,
        }
    }
}
