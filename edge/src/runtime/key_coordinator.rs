//! The Durable Object kept per (user, key): it loads its record, applies the protocol's pure
//! transitions ([`crate::coordination`]) and saves the result, with an alarm at the record's end.
//!
//! Each message is decided against the record held in memory, and the memory is updated in the
//! same synchronous step as the decision, before any write is awaited, so two attempts arriving
//! together can never both be told to forward. Storage (the object's SQLite-backed key-value
//! store) keeps the record across evictions; the alarm deletes it when its time is up: a lapsed
//! in-flight mark, or a kept reply at the key's expiry.
//!
//! Messages and the stored record are JSON read with `serde_json::from_slice`, for the size of
//! the Wasm module (its aim: `docs/figures.md`): not through `Request::json` or
//! `Storage::get`/`put`, which would add serde-wasm-bindgen's deserializer for the same types,
//! nor `from_str`, which would add a second copy of `serde_json`'s parser beside the one the
//! gate's `from_slice` needs.

use std::cell::RefCell;
use std::pin::pin;
use std::time::Duration;

use futures_channel::oneshot;
use futures_util::future::{Either, select};

use worker::js_sys::Date as JsDate;
use worker::wasm_bindgen::JsValue;
use worker::wasm_bindgen_futures::JsFuture;
use worker::{
    Delay, DurableObject, Env, Error, Method, Request, Response, Result, ScheduledTime, State,
    durable_object,
};

use super::clock::now_ms;
use crate::coordination::{
    BEGIN_PATH, BeginRequest, BeginVerdict, FINISH_PATH, FinishReport, KeyRecord, RecordChange,
    WaitEnd, WaiterNews, Waiters, begin, finish, on_alarm, wait_until,
};

/// The storage key of the record.
const RECORD_KEY: &str = "record";

/// The per-(user, key) coordinator (`class_name = "KeyCoordinator"` in `wrangler.toml`).
#[durable_object]
pub struct KeyCoordinator {
    state: State,
    /// The record as last read or written: outer `None` until read from storage once, inner
    /// `None` when the key is free at the edge.
    record: RefCell<Option<Option<KeyRecord>>>,
    /// The attempts waiting for the in-flight attempt's reply.
    waiters: RefCell<Waiters>,
}

impl DurableObject for KeyCoordinator {
    fn new(state: State, _env: Env) -> Self {
        KeyCoordinator {
            state,
            record: RefCell::new(None),
            waiters: RefCell::new(Waiters::default()),
        }
    }

    async fn fetch(&self, mut request: Request) -> Result<Response> {
        match (request.method(), request.path().as_str()) {
            (Method::Post, BEGIN_PATH) => {
                let message: BeginRequest = serde_json::from_slice(&request.bytes().await?)?;
                let current = self.load().await?;
                let now = now_ms();
                let (verdict, change) = begin(current.as_ref(), &message, now);
                let parked = match verdict {
                    BeginVerdict::InProgress => wait_until(current.as_ref(), &message, now)
                        .and_then(|until| Some((until, self.waiters.borrow_mut().park()?))),
                    _ => None,
                };
                self.apply(change).await?;
                let verdict = match parked {
                    Some((until, news)) => BeginVerdict::AfterWait {
                        end: wait_for(news, until.saturating_sub(now)).await,
                    },
                    None => verdict,
                };
                Response::from_json(&verdict)
            }
            (Method::Post, FINISH_PATH) => {
                let report: FinishReport = serde_json::from_slice(&request.bytes().await?)?;
                let current = self.load().await?;
                let step = finish(current.as_ref(), &report, now_ms());
                if let Some(news) = &step.tell_waiters {
                    self.waiters.borrow_mut().reply_all(news);
                }
                self.apply(step.change).await?;
                Ok(Response::empty()?.with_status(204))
            }
            _ => Response::error("no such coordinator message", 404),
        }
    }

    async fn alarm(&self) -> Result<Response> {
        let current = self.load().await?;
        let step = on_alarm(current.as_ref(), now_ms());
        self.apply(step.change).await?;
        if let Some(at_ms) = step.next_alarm_ms {
            self.state.storage().set_alarm(scheduled_at(at_ms)).await?;
        }
        Response::empty()
    }
}

impl KeyCoordinator {
    /// The current record, read from storage the first time only. A read that finishes after
    /// another message already loaded (and maybe changed) the record does not overwrite it.
    async fn load(&self) -> Result<Option<KeyRecord>> {
        if let Some(loaded) = self.record.borrow().as_ref() {
            return Ok(loaded.clone());
        }
        // The raw value, not `Storage::get::<String>` (see the module's docs).
        let storage = self.state.storage();
        let stored = JsFuture::from(storage.as_raw().get(RECORD_KEY)?).await?;
        let stored = if stored.is_undefined() {
            None
        } else {
            let json = stored
                .as_string()
                .ok_or_else(|| Error::RustError("the stored record is not text".to_owned()))?;
            Some(serde_json::from_slice::<KeyRecord>(json.as_bytes())?)
        };
        Ok(self.record.borrow_mut().get_or_insert(stored).clone())
    }

    /// Applies a change: in memory at once, then in storage with the alarm at the record's end.
    async fn apply(&self, change: RecordChange) -> Result<()> {
        let storage = self.state.storage();
        match change {
            RecordChange::Unchanged => Ok(()),
            RecordChange::Store(record) => {
                let json = serde_json::to_string(&record)?;
                let ends_at_ms = record.ends_at_ms();
                *self.record.borrow_mut() = Some(Some(record));
                storage.put_raw(RECORD_KEY, json).await?;
                storage.set_alarm(scheduled_at(ends_at_ms)).await
            }
            RecordChange::Clear => {
                *self.record.borrow_mut() = Some(None);
                storage.delete(RECORD_KEY).await?;
                storage.delete_alarm().await
            }
        }
    }
}

/// Waits `within_ms` at most for the first attempt's reply.
async fn wait_for(news: oneshot::Receiver<WaiterNews>, within_ms: u64) -> WaitEnd {
    let timer = pin!(Delay::from(Duration::from_millis(within_ms)));
    match select(news, timer).await {
        Either::Left((Ok(Some(reply)), _)) => WaitEnd::Replied { reply },
        // No reply the edge could keep, or the time ran out.
        _ => WaitEnd::StillInProgress,
    }
}

/// An alarm time from Unix milliseconds.
fn scheduled_at(at_ms: u64) -> ScheduledTime {
    // Milliseconds since 1970 stay far below 2^53, where an f64 is exact.
    ScheduledTime::new(JsDate::new(&JsValue::from_f64(at_ms as f64)))
}
