//! Times the edge gate natively: `gate-bench [ROUNDS]` (20,000 by default) warms up, then runs
//! [`gate_bench::check_rounds`] in five batches of ROUNDS requests and prints the median
//! batch's microseconds per request, a bare number (`bench/edge-gate.sh` puts it beside the
//! Wasm figure).

use std::process::ExitCode;
use std::time::Instant;

use gate_bench::check_rounds;

/// The timed batches; the median is reported.
const BATCHES: usize = 5;

fn main() -> ExitCode {
    let rounds = match std::env::args().nth(1).map(|text| text.parse::<u32>()) {
        None => 20_000,
        Some(Ok(rounds)) if rounds > 0 => rounds,
        Some(_) => {
            eprintln!("usage: gate-bench [ROUNDS, a positive whole number]");
            return ExitCode::FAILURE;
        }
    };
    check_rounds(rounds / 10 + 1);
    let mut micros_per_request = Vec::with_capacity(BATCHES);
    for _ in 0..BATCHES {
        let started = Instant::now();
        let admitted = check_rounds(rounds);
        let elapsed = started.elapsed();
        if admitted != rounds {
            eprintln!("gate-bench: the gate admitted {admitted} of {rounds} requests");
            return ExitCode::FAILURE;
        }
        micros_per_request.push(elapsed.as_secs_f64() * 1e6 / f64::from(rounds));
    }
    micros_per_request.sort_by(f64::total_cmp);
    println!("{:.3}", micros_per_request[BATCHES / 2]);
    ExitCode::SUCCESS
}
