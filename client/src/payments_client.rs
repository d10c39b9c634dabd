//! [`PaymentsClient`]: one user's client. It starts actions (minting the key and saving it
//! before anything is sent), lists and resumes saved ones, and ends them; the sending itself is
//! in `attempt_loop` and the look-up after the deadline in `status_check`.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use shared::retry::{ClientRules, PendingAction};
use shared::{Operation, UserId};

use crate::action_result::{ActionResult, Completion, KnownBy};
use crate::action_store::{ActionStore, SavedAction, StoreError};
use crate::clock::{Clock, SystemClock, elapsed_between};
use crate::events::{Event, Report};
use crate::jitter::{Jitter, OsJitter};
use crate::transport::Transport;

/// A client for one user, over a transport, with a store of pending actions.
#[derive(Debug)]
pub struct PaymentsClient<T, C = SystemClock, J = OsJitter> {
    pub(crate) user: UserId,
    pub(crate) transport: T,
    pub(crate) store: Arc<dyn ActionStore>,
    pub(crate) config: ClientRules,
    pub(crate) clock: C,
    pub(crate) jitter: J,
}

impl<T: Transport> PaymentsClient<T> {
    /// A client for `user` sending through `transport` (which must carry `user`'s token), on
    /// real time and the system's randomness.
    pub fn new(
        user: UserId,
        transport: T,
        store: impl ActionStore,
        config: ClientRules,
    ) -> PaymentsClient<T> {
        PaymentsClient {
            user,
            transport,
            store: Arc::new(store),
            config,
            clock: SystemClock,
            jitter: OsJitter,
        }
    }
}

impl<T: Transport, C: Clock, J: Jitter> PaymentsClient<T, C, J> {
    /// The same client on another clock.
    pub fn with_clock<C2: Clock>(self, clock: C2) -> PaymentsClient<T, C2, J> {
        PaymentsClient {
            user: self.user,
            transport: self.transport,
            store: self.store,
            config: self.config,
            clock,
            jitter: self.jitter,
        }
    }

    /// The same client with another source of jitter.
    pub fn with_jitter<J2: Jitter>(self, jitter: J2) -> PaymentsClient<T, C, J2> {
        PaymentsClient {
            user: self.user,
            transport: self.transport,
            store: self.store,
            config: self.config,
            clock: self.clock,
            jitter,
        }
    }

    /// Starts a new user action: mints its key, freezes its body and saves both durably. Send
    /// it with [`PaymentsClient::run`]; if saving fails, nothing must be sent.
    pub async fn begin(
        &self,
        operation: Operation,
        target: &str,
        body: &impl Serialize,
    ) -> Result<SavedAction, StoreError> {
        let action = PendingAction::start(operation, target, body);
        let saved = SavedAction::new(self.user.clone(), action, self.clock.now());
        let store = Arc::clone(&self.store);
        let to_save = saved.clone();
        in_background(move || store.save(&to_save)).await?;
        Ok(saved)
    }

    /// This user's saved actions, oldest first.
    pub async fn pending(&self) -> Result<Vec<SavedAction>, StoreError> {
        let store = Arc::clone(&self.store);
        let user = self.user.clone();
        let all = in_background(move || store.load_all()).await?;
        Ok(all
            .into_iter()
            .filter(|saved| saved.user() == user)
            .collect())
    }

    /// Carries on with every saved action of this user, one after the other, with its saved key
    /// and body: after a restart, before anything new is started.
    pub async fn resume_all(&self, report: &Report) -> Result<Vec<Completion>, StoreError> {
        let mut completions = Vec::new();
        for saved in self.pending().await? {
            report(&Event::Resuming {
                key: saved.key().clone(),
                elapsed: self.elapsed(&saved),
            });
            completions.push(self.run(&saved, report).await);
        }
        Ok(completions)
    }

    /// Time since the user started the action, on this client's clock.
    pub(crate) fn elapsed(&self, saved: &SavedAction) -> Duration {
        elapsed_between(saved.started_at(), self.clock.now())
    }

    /// Deletes the action from the store; a failure is reported, not fatal (a later resume only
    /// gets the same reply replayed).
    pub(crate) async fn forget(&self, saved: &SavedAction, report: &Report) {
        let store = Arc::clone(&self.store);
        let key = saved.key().clone();
        if let Err(error) = in_background(move || store.forget(&key)).await {
            report(&Event::ForgetFailed {
                reason: error.to_string(),
            });
        }
    }

    /// The completion of `saved` with `outcome`.
    pub(crate) fn completion(
        &self,
        saved: &SavedAction,
        attempts: u32,
        (result, known_by): (ActionResult, Option<KnownBy>),
    ) -> Completion {
        Completion {
            key: saved.key().clone(),
            attempts,
            result,
            known_by,
        }
    }
}

/// Runs blocking file work off the async threads (a save waits for the disk's fsync).
async fn in_background<R: Send + 'static>(
    work: impl FnOnce() -> Result<R, StoreError> + Send + 'static,
) -> Result<R, StoreError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| StoreError::Interrupted(error.to_string()))?
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::file_store::FileStore;
    use crate::test_support::{
        FakeClock, ScriptedTransport, Step, TempDir, collect_events, pay_body, user,
    };

    fn client(
        dir: &TempDir,
        transport: &Arc<ScriptedTransport>,
        user_id: u64,
    ) -> PaymentsClient<Arc<ScriptedTransport>, Arc<FakeClock>> {
        let store = FileStore::open(dir.path()).expect("opens");
        PaymentsClient::new(
            user(user_id),
            Arc::clone(transport),
            store,
            ClientRules::default(),
        )
        .with_clock(Arc::new(FakeClock::default()))
    }

    #[tokio::test]
    async fn a_crash_between_save_and_send_resumes_with_the_same_key_and_body_bytes() {
        let dir = TempDir::new();
        let transport = Arc::new(ScriptedTransport::replying([Step::status(201)]));
        let before_crash = client(&dir, &transport, 7);
        let saved = before_crash
            .begin(Operation::PayBill, "elec-1", &pay_body(230_000))
            .await
            .expect("saved");
        drop(before_crash); // Killed after the save, before the first send.
        assert!(transport.sent().is_empty());

        let after_restart = client(&dir, &transport, 7);
        let (events, report) = collect_events();
        let completions = after_restart.resume_all(&report).await.expect("resumes");

        assert_eq!(completions.len(), 1);
        assert_eq!(&completions[0].key, saved.key());
        assert_eq!(
            transport.sent(),
            [(saved.key().clone(), saved.action().body().to_vec())]
        );
        assert!(matches!(completions[0].result, ActionResult::Replied(ref a) if a.status == 201));
        assert!(matches!(
            events.lock().expect("events")[0],
            Event::Resuming { .. }
        ));
        assert!(after_restart.pending().await.expect("lists").is_empty());
    }

    #[tokio::test]
    async fn a_new_user_action_gets_a_new_key_even_with_the_same_body() {
        let dir = TempDir::new();
        let transport = Arc::new(ScriptedTransport::replying([]));
        let phone = client(&dir, &transport, 7);
        let first = phone
            .begin(Operation::PayBill, "elec-1", &pay_body(230_000))
            .await
            .expect("saved");
        let second = phone
            .begin(Operation::PayBill, "elec-1", &pay_body(230_000))
            .await
            .expect("saved");
        assert_ne!(first.key(), second.key());
        assert_eq!(first.action().body(), second.action().body());
        assert_eq!(phone.pending().await.expect("lists").len(), 2);
    }

    #[tokio::test]
    async fn resume_leaves_other_users_actions_alone() {
        let dir = TempDir::new();
        let transport = Arc::new(ScriptedTransport::replying([Step::status(201)]));
        client(&dir, &transport, 8)
            .begin(Operation::PayBill, "elec-1", &pay_body(1))
            .await
            .expect("saved");
        let completions = client(&dir, &transport, 7)
            .resume_all(&|_| {})
            .await
            .expect("resumes");
        assert!(completions.is_empty());
        assert!(transport.sent().is_empty());
        assert_eq!(
            client(&dir, &transport, 8)
                .pending()
                .await
                .expect("lists")
                .len(),
            1
        );
    }
}
