//! The edge's added latency, measured in one run against the same backend: sequential requests
//! of each kind, through the Worker (under `workerd`) and to the backend directly.
//!
//! - a replay: a finished key asked again (the edge replies from its Durable Object; the backend
//!   reads the key and its payment from PostgreSQL);
//! - a read: `GET /v1/payments/{id}`, forwarded through the edge unchanged.
//!
//! ```sh
//! scripts/build-edge.sh
//! cargo build --profile server -p backend -p bank-simulator --bins
//! cargo run --profile server -p edge --example edge_latency -- 500   # requests per kind (200)
//! ```
//!
//! The servers are taken from the example's own profile directory, so `--profile server` (the
//! backend's production build) measures against a production-grade backend; the plain debug
//! profile works too, with a slower backend.
//!
//! It starts its own stack (bank simulator, backend on a fresh database, workerd), like the
//! end-to-end tests, and stops it at the end.

#[cfg(not(target_arch = "wasm32"))]
#[path = "../tests/support/mod.rs"]
mod support;

#[cfg(not(target_arch = "wasm32"))]
#[tokio::main(flavor = "current_thread")]
async fn main() {
    use std::time::{Duration, Instant};

    use support::{Call, Stack, StackOptions, Via};

    /// Sends `call` `count` times in a row and returns each round trip, sorted.
    async fn time_calls(stack: &Stack, via: Via, call: &Call, count: usize) -> Vec<Duration> {
        let mut timings = Vec::with_capacity(count);
        for _ in 0..count {
            let started = Instant::now();
            let reply = stack.send(via, call).await;
            timings.push(started.elapsed());
            assert!(reply.status < 500, "{via:?} replied {}", reply.status);
        }
        timings.sort();
        timings
    }

    fn millis(duration: Duration) -> f64 {
        duration.as_secs_f64() * 1000.0
    }

    fn summary(timings: &[Duration]) -> (f64, f64, f64) {
        let mean = timings.iter().map(|t| millis(*t)).sum::<f64>() / timings.len().max(1) as f64;
        let at = |q: f64| millis(timings[((timings.len() - 1) as f64 * q) as usize]);
        (mean, at(0.5), at(0.99))
    }

    let count: usize = std::env::args()
        .nth(1)
        .and_then(|arg| arg.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(200);
    let stack = Stack::start(StackOptions::default()).await;
    let body = r#"{"amount_paise":230000,"payer_vpa":"asha@okbank"}"#;
    let key = uuid::Uuid::new_v4().to_string();
    let pay = Call::pay(7, &key, "elec-42", body);
    let paid = stack.send(Via::Edge, &pay).await;
    assert_eq!(paid.status, 201, "the payment to replay");
    let location = paid.header("location").expect("Location").to_owned();
    let read = Call::get(&location, Some(7));

    // Warm both paths (the Worker instance, its object, the backend's connections).
    time_calls(&stack, Via::Edge, &pay, 20).await;
    time_calls(&stack, Via::Backend, &pay, 20).await;
    time_calls(&stack, Via::Edge, &read, 20).await;
    time_calls(&stack, Via::Backend, &read, 20).await;

    println!("{count} sequential requests per kind, one client, 127.0.0.1 (ms)");
    println!("{:<50} {:>8} {:>8} {:>8}", "kind", "mean", "p50", "p99");
    for (kind, call) in [
        ("replay of a finished payment", &pay),
        ("GET /v1/payments/{id}", &read),
    ] {
        let edge = summary(&time_calls(&stack, Via::Edge, call, count).await);
        let direct = summary(&time_calls(&stack, Via::Backend, call, count).await);
        println!(
            "{:<50} {:>8.3} {:>8.3} {:>8.3}",
            format!("{kind}, edge"),
            edge.0,
            edge.1,
            edge.2
        );
        println!(
            "{:<50} {:>8.3} {:>8.3} {:>8.3}",
            format!("{kind}, direct"),
            direct.0,
            direct.1,
            direct.2
        );
        println!(
            "{:<50} {:>8.3} {:>8.3}   (edge/direct mean {:.2}x)",
            format!("{kind}, added by the edge"),
            edge.0 - direct.0,
            edge.1 - direct.1,
            edge.0 / direct.0
        );
    }
    stack.stop().await;
}

/// The benchmark drives native processes; a wasm32 build of the examples has nothing to run.
#[cfg(target_arch = "wasm32")]
fn main() {}
