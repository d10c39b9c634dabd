//! The server path's vectors (`shared/vectors/server-path.json`) walked by the real
//! interpreter: the flows log each step the machine gives (at debug level, labelled as the
//! vectors label them), [`Walked`] collects them for the test's thread, and
//! [`Walked::assert_took`] compares a request's steps with the vector case of the same SPEC row
//! (requests running at once are told apart by their outermost span).
//! The vectors check the machine alone; this checks that the interpreter, on a real store, meets
//! the events each case feeds it, in that order.

use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use tracing::field::{Field, Visit};
use tracing::span::Id;
use tracing::subscriber::DefaultGuard;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{Layer, Registry};

const VECTORS: &str = include_str!("../../../shared/vectors/server-path.json");

/// The steps the path took on this thread since the last check.
#[derive(Clone, Default)]
pub struct Walked {
    steps: Arc<Mutex<Vec<Taken>>>,
}

/// A step, and the request that took it (its outermost span, `pay_bill` or `refund_payment`).
struct Taken {
    request: Option<Id>,
    step: String,
}

impl Walked {
    /// Collects the steps of every request on the test's thread (a `#[tokio::test]` runs its
    /// tasks there) until the guard drops.
    pub fn collect() -> (Walked, DefaultGuard) {
        // tracing caches whether a callsite is wanted, for the whole process, from the first
        // thread to reach it; a test thread with no subscriber would cache "never" and blind
        // the others' collectors (tokio-rs/tracing#3611). Every thread has a subscriber, then.
        static EVERY_THREAD_SUBSCRIBED: Once = Once::new();
        EVERY_THREAD_SUBSCRIBED.call_once(|| {
            let _ = tracing::subscriber::set_global_default(Registry::default());
        });
        let walked = Walked::default();
        let subscriber = Registry::default().with(walked.clone());
        (walked, tracing::subscriber::set_default(subscriber))
    }

    /// Checks that the requests since the last check took the steps of the vector case named
    /// `case`, one request after another: all of them, or, for a case that stops before the
    /// reply (the rest is another case's, such as a new key's), its steps first.
    pub fn assert_took(&self, case: &str) {
        let took: Vec<String> = self.take().into_iter().map(|taken| taken.step).collect();
        assert_case(&took, case);
    }

    /// The same for two requests running at once: one took `other` (a first attempt still
    /// running, say), the other the case's steps, however their steps interleaved.
    pub fn assert_took_alongside(&self, other: &[&str], case: &str) {
        let requests = self.took_by_request();
        let [first, second] = <[Vec<String>; 2]>::try_from(requests)
            .unwrap_or_else(|requests| panic!("two requests beside \"{case}\": {requests:?}"));
        let case_steps = match first == other {
            true => second,
            false => {
                assert_eq!(second, other, "a request took {other:?}, beside \"{case}\"");
                first
            }
        };
        assert_case(&case_steps, case);
    }

    /// The steps since the last check, one list per request, in the order of their first steps.
    /// Requests at once are apart; one that began after another ended may share its span's id
    /// and count as the same request, so sequential requests are checked one at a time.
    pub fn took_by_request(&self) -> Vec<Vec<String>> {
        let mut requests: Vec<(Option<Id>, Vec<String>)> = Vec::new();
        for Taken { request, step } in self.take() {
            match requests.iter_mut().find(|(id, _)| *id == request) {
                Some((_, steps)) => steps.push(step),
                None => requests.push((request, vec![step])),
            }
        }
        requests.into_iter().map(|(_, steps)| steps).collect()
    }

    /// Waits, a few seconds at most, until the requests have taken `step` `times` since the last
    /// check: a request running in another task has got that far.
    pub async fn until_taken(&self, step: &str, times: usize) {
        for _ in 0..5_000 {
            if self.times_taken(step) >= times {
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        panic!("no request took \"{step}\" {times} times");
    }

    fn times_taken(&self, step: &str) -> usize {
        let steps = self.steps.lock().expect("unpoisoned");
        steps.iter().filter(|taken| taken.step == step).count()
    }

    fn take(&self) -> Vec<Taken> {
        std::mem::take(&mut *self.steps.lock().expect("unpoisoned"))
    }
}

/// Checks that `took` are the steps of the vector case named `case`: all of them, or, for a
/// case that stops before the reply, its steps first.
pub fn assert_case(took: &[String], case: &str) {
    let expected = vector_steps(case);
    let whole_case = expected
        .last()
        .is_some_and(|last| last.starts_with("reply") || last == "give_up");
    let compared = match whole_case {
        true => took,
        false => &took[..expected.len().min(took.len())],
    };
    assert_eq!(compared, &expected[..], "the steps of \"{case}\"");
}

impl<S> Layer<S> for Walked
where
    S: tracing::Subscriber + for<'lookup> LookupSpan<'lookup>,
{
    fn on_event(&self, event: &tracing::Event<'_>, context: Context<'_, S>) {
        if !event.metadata().target().starts_with("backend::flows") {
            return;
        }
        let mut step = StepField(None);
        event.record(&mut step);
        let Some(step) = step.0 else {
            return;
        };
        let request = context
            .event_scope(event)
            .and_then(|scope| scope.from_root().next())
            .map(|outermost| outermost.id());
        let taken = Taken { request, step };
        self.steps.lock().expect("unpoisoned").push(taken);
    }
}

/// The `step` field of an event, if it has one.
struct StepField(Option<String>);

impl Visit for StepField {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "step" {
            self.0 = Some(format!("{value:?}"));
        }
    }
}

/// The labels of the steps of the vector case named `name` (each step of a case's `path` is
/// an event and the label of the step it leads to).
fn vector_steps(name: &str) -> Vec<String> {
    let vectors: serde_json::Value = serde_json::from_str(VECTORS).expect("the vectors parse");
    let cases = vectors["cases"].as_array().expect("a list of cases");
    let case = cases
        .iter()
        .find(|case| case["name"] == name)
        .unwrap_or_else(|| panic!("no vector case \"{name}\""));
    let path = case["path"].as_array().expect("a case's path");
    path.iter()
        .map(|step| step[1].as_str().expect("a step's label").to_owned())
        .collect()
}
