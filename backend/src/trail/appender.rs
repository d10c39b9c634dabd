//! [`Appender`]: writes the trail's observations (replays, refusals, waits) off the request
//! path. Requests hand their event to a bounded queue and go on; one task writes what has
//! queued up, or arrives within a short gathering time, as one transaction, folding identical
//! observations of one key (a retry storm's thousand replays) into one row with a `repeats`
//! count and the first request's id (and trace id).
//!
//! Bounded both ways: a full queue drops the observation (counted in the log) rather than slow
//! a replay down or grow without limit; state changes never go this way, so a dropped
//! observation never hides a change of money or key. When every handle is dropped (shutdown)
//! the task writes what is left and ends.

use shared::UserId;
use std::collections::HashMap;
use std::time::Duration;

use time::OffsetDateTime;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use uuid::Uuid;

use crate::domain::{Cause, EventKind, NewEvent, Observed};
use crate::store::{KeyRef, SharedStore};

/// How many observations may wait to be written.
const QUEUE_CAPACITY: usize = 10_000;

/// The most observations one transaction writes.
const BATCH_LIMIT: usize = 500;

/// How long the task gathers observations after the first of a batch before writing them (or
/// until [`BATCH_LIMIT`]): a retry storm's replays of one key then fold into one row for this
/// long, not one row per write's round trip (PostgreSQL's CPU per replay: docs/figures.md). An
/// observation reaches the table this much later; none is on a request's path.
const GATHER_FOR: Duration = Duration::from_millis(20);

/// Hands observations to the writing task. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Appender {
    queue: mpsc::Sender<Observed>,
}

impl Appender {
    /// Starts the writing task on `store`; it ends once every handle is dropped and the queue
    /// is written out.
    pub fn start(store: SharedStore) -> (Appender, JoinHandle<()>) {
        let (queue, waiting) = mpsc::channel(QUEUE_CAPACITY);
        let task = tokio::spawn(write_batches(store, waiting));
        (Appender { queue }, task)
    }

    /// Records what the request of `cause` saw of `key`: `movement_id` names the claim, or
    /// `None` for the key's claim as it stands when the row is written.
    pub fn observe_key(
        &self,
        key: KeyRef,
        movement_id: Option<Uuid>,
        (kind, detail): (EventKind, &str),
        cause: &Cause,
    ) {
        self.observe(NewEvent {
            user_id: key.user.clone(),
            key: Some(key.key),
            movement_id,
            kind,
            detail: Some(detail.to_owned()),
            request_id: cause.request_id.as_ref().map(|id| id.as_str().to_owned()),
            trace_id: cause.trace_id,
            operator: cause.operator.clone(),
        });
    }

    /// Records an observation, now; never waits.
    pub fn observe(&self, event: NewEvent) {
        let observed = Observed {
            event,
            at: OffsetDateTime::now_utc(),
            repeats: 1,
        };
        if let Err(error) = self.queue.try_send(observed) {
            tracing::warn!(event = ?error.into_inner().event.kind, "audit trail queue full: observation dropped");
        }
    }
}

async fn write_batches(store: SharedStore, mut waiting: mpsc::Receiver<Observed>) {
    let mut batch = Vec::with_capacity(BATCH_LIMIT);
    while waiting.recv_many(&mut batch, BATCH_LIMIT).await > 0 {
        gather_more(&mut waiting, &mut batch).await;
        let rows = fold_repeats(std::mem::take(&mut batch));
        if let Err(error) = store.append_events(&rows).await {
            tracing::error!(%error, rows = rows.len(), "audit trail observations not written");
        }
    }
}

/// Adds to `batch` what arrives within [`GATHER_FOR`], up to [`BATCH_LIMIT`]; returns early
/// once the queue is closed and empty (shutdown writes what is left at once).
async fn gather_more(waiting: &mut mpsc::Receiver<Observed>, batch: &mut Vec<Observed>) {
    let deadline = Instant::now() + GATHER_FOR;
    while batch.len() < BATCH_LIMIT {
        let room = BATCH_LIMIT - batch.len();
        match tokio::time::timeout_at(deadline, waiting.recv_many(batch, room)).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// Folds observations of the same (user, key, claim, event) into the first of them.
fn fold_repeats(batch: Vec<Observed>) -> Vec<Observed> {
    let mut rows: Vec<Observed> = Vec::with_capacity(batch.len());
    let mut index: HashMap<(UserId, Option<Uuid>, Option<Uuid>, EventKind), usize> = HashMap::new();
    for observed in batch {
        let event = &observed.event;
        let identity = (
            event.user_id.clone(),
            event.key,
            event.movement_id,
            event.kind,
        );
        match index.get(&identity) {
            Some(&row) => rows[row].repeats += observed.repeats,
            None => {
                index.insert(identity, rows.len());
                rows.push(observed);
            }
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn replay(user: u64, key: u128, request: &str) -> Observed {
        Observed {
            event: NewEvent {
                user_id: UserId::numbered(user),
                key: Some(Uuid::from_u128(key)),
                movement_id: Some(Uuid::from_u128(key + 1)),
                kind: EventKind::Replayed,
                detail: None,
                request_id: Some(request.into()),
                trace_id: None,
                operator: None,
            },
            at: OffsetDateTime::UNIX_EPOCH,
            repeats: 1,
        }
    }

    #[tokio::test]
    async fn a_batch_gathers_what_arrives_after_its_first_up_to_its_limit() {
        let (queue, mut waiting) = mpsc::channel(QUEUE_CAPACITY);
        let mut batch = Vec::new();
        queue.send(replay(1, 10, "r-1")).await.expect("queued");
        assert_eq!(waiting.recv_many(&mut batch, BATCH_LIMIT).await, 1);
        queue.send(replay(1, 10, "r-2")).await.expect("queued");
        gather_more(&mut waiting, &mut batch).await;
        assert_eq!(
            batch.len(),
            2,
            "the second arrived within the gathering time"
        );

        for n in 0..BATCH_LIMIT + 200 {
            queue
                .send(replay(1, 10, &format!("r-{n}")))
                .await
                .expect("queued");
        }
        drop(queue);
        let mut batch = Vec::new();
        waiting.recv_many(&mut batch, 1).await;
        gather_more(&mut waiting, &mut batch).await;
        assert_eq!(batch.len(), BATCH_LIMIT, "a batch stops at its limit");
        let mut rest = Vec::new();
        assert_eq!(waiting.recv_many(&mut rest, BATCH_LIMIT).await, 200);
        gather_more(&mut waiting, &mut rest).await;
        assert_eq!(rest.len(), 200, "a closed, empty queue ends the gathering");
    }

    #[test]
    fn a_storm_of_one_keys_replays_is_one_row_that_counts_them_and_keeps_the_first_request() {
        let batch = vec![
            replay(1, 10, "r-1"),
            replay(2, 10, "r-2"),
            replay(1, 10, "r-3"),
            replay(1, 10, "r-4"),
        ];
        let rows = fold_repeats(batch);
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert_eq!(rows[0].repeats, 3);
        assert_eq!(rows[0].event.request_id.as_deref(), Some("r-1"));
        assert_eq!(
            (&rows[1].event.user_id, rows[1].repeats),
            (&UserId::numbered(2), 1)
        );
    }
}
