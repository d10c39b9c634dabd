//! The server path's vectors (`shared/vectors/server-path.json`) walked by the real
//! interpreter: the flows log each step the machine gives (at debug level, labelled as the
//! vectors label them), [`Walked`] collects them for the test's thread, and
//! [`Walked::assert_took`] compares a request's steps with the vector case of the same SPEC row.
//! The vectors check the machine alone; this checks that the interpreter, on a real store, meets
//! the events each case feeds it, in that order.

use std::sync::{Arc, Mutex, Once};

use tracing::field::{Field, Visit};
use tracing::subscriber::DefaultGuard;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::{Layer, Registry};

const VECTORS: &str = include_str!("../../../shared/vectors/server-path.json");

/// The steps the path took on this thread since the last check.
#[derive(Clone, Default)]
pub struct Walked {
    steps: Arc<Mutex<Vec<String>>>,
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
    /// `case`: all of them, or, for a case that stops before the reply (the rest is another
    /// case's, such as a new key's), its steps first.
    pub fn assert_took(&self, case: &str) {
        self.assert_took_after(&[], case);
    }

    /// The same, for requests whose steps since the last check begin with `before` (those of
    /// a request still running, say) and go on with the case's.
    pub fn assert_took_after(&self, before: &[&str], case: &str) {
        let took = std::mem::take(&mut *self.steps.lock().expect("unpoisoned"));
        let (took_before, took) = took.split_at(before.len().min(took.len()));
        assert_eq!(took_before, before, "the steps before \"{case}\"");
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
}

impl<S: tracing::Subscriber> Layer<S> for Walked {
    fn on_event(&self, event: &tracing::Event<'_>, _context: Context<'_, S>) {
        if !event.metadata().target().starts_with("backend::flows") {
            return;
        }
        let mut step = StepField(None);
        event.record(&mut step);
        if let Some(step) = step.0 {
            self.steps.lock().expect("unpoisoned").push(step);
        }
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
