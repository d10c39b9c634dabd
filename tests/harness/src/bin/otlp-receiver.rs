//! `otlp-receiver`: the harness's OTLP/HTTP trace receiver as a process, for a benchmark that
//! exports traces somewhere real (`bench/observability.sh`). Prints
//! `otlp receiver listening on http://ADDR` and serves until killed; `GET /received` tells how
//! many spans arrived.

use test_harness::OtlpReceiver;

#[tokio::main]
async fn main() {
    let receiver = OtlpReceiver::start().await;
    println!("otlp receiver listening on {}", receiver.endpoint());
    std::future::pending::<()>().await;
}
