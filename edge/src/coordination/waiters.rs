//! [`Waiters`]: the attempts an object holds while its key's first attempt is forwarded, each
//! waiting (`Prefer: wait`) to be handed that attempt's reply.
//!
//! They live in the object's memory only: a waiter is an open request, which an eviction or a
//! restart of the object ends anyway. Each is a one-shot channel; the object replies to all of them
//! when the first attempt's report arrives, and each waiter gives up by itself when its wait
//! runs out. A waiter whose client went away is a channel whose receiving end is gone: it is
//! dropped the next time the list is looked at, and replying to it costs nothing.

use futures_channel::oneshot;

use super::saved_reply::SavedReply;

/// The most attempts one key holds at once; more get 409 at once, as without waiting. The
/// rate limits keep one user's attempts far fewer.
pub const MAX_WAITERS_PER_KEY: usize = 64;

/// What a waiter is handed: the first attempt's reply, or `None` if the first attempt ended
/// without one the edge could keep (its body was not text).
pub type WaiterNews = Option<SavedReply>;

/// The attempts waiting on one key.
#[derive(Debug, Default)]
pub struct Waiters {
    parked: Vec<oneshot::Sender<WaiterNews>>,
}

impl Waiters {
    /// Parks an attempt: the receiver gets the first attempt's reply. `None` if
    /// [`MAX_WAITERS_PER_KEY`] are already waiting.
    pub fn park(&mut self) -> Option<oneshot::Receiver<WaiterNews>> {
        self.drop_departed();
        if self.parked.len() >= MAX_WAITERS_PER_KEY {
            return None;
        }
        let (sender, receiver) = oneshot::channel();
        self.parked.push(sender);
        Some(receiver)
    }

    /// Hands `news` to every waiting attempt and forgets them all; how many were still there.
    pub fn reply_all(&mut self, news: &WaiterNews) -> usize {
        self.parked
            .drain(..)
            .filter_map(|waiter| waiter.send(news.clone()).ok())
            .count()
    }

    /// How many attempts are waiting (those that went away are dropped first).
    pub fn len(&mut self) -> usize {
        self.drop_departed();
        self.parked.len()
    }

    /// Whether no attempt is waiting.
    pub fn is_empty(&mut self) -> bool {
        self.len() == 0
    }

    fn drop_departed(&mut self) {
        self.parked.retain(|waiter| !waiter.is_canceled());
    }
}

#[cfg(test)]
mod tests {
    // Under wasm32 the same tests run in Node through wasm-bindgen-test (`.cargo/config.toml`).
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    use super::*;

    fn created() -> SavedReply {
        SavedReply {
            status: 201,
            content_type: Some("application/json".to_owned()),
            location: None,
            retry_after: None,
            expires: None,
            body: "{}".to_owned(),
        }
    }

    #[test]
    fn every_waiter_gets_the_reply_once() {
        let mut waiters = Waiters::default();
        let mut receivers: Vec<_> = (0..19).map(|_| waiters.park().expect("room")).collect();
        assert_eq!(waiters.len(), 19);
        assert_eq!(waiters.reply_all(&Some(created())), 19);
        assert!(waiters.is_empty());
        for receiver in &mut receivers {
            assert_eq!(receiver.try_recv(), Ok(Some(Some(created()))));
        }
    }

    #[test]
    fn a_waiter_that_went_away_is_dropped_and_costs_nothing() {
        let mut waiters = Waiters::default();
        let gone: Vec<_> = (0..5).map(|_| waiters.park().expect("room")).collect();
        let mut staying = waiters.park().expect("room");
        drop(gone);
        assert_eq!(waiters.len(), 1);
        assert_eq!(waiters.reply_all(&None), 1);
        assert_eq!(staying.try_recv(), Ok(Some(None)));
    }

    #[test]
    fn past_the_bound_an_attempt_is_not_parked() {
        let mut waiters = Waiters::default();
        let _held: Vec<_> = (0..MAX_WAITERS_PER_KEY)
            .map(|_| waiters.park().expect("room"))
            .collect();
        assert!(waiters.park().is_none());
    }
}
