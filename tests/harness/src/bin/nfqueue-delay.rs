//! `nfqueue-delay QUEUE DELAY_MS JITTER_MS`: holds every packet that netfilter queues to NFQUEUE
//! number QUEUE for a delay drawn uniformly from DELAY_MS ± JITTER_MS, then lets it through.
//!
//! It exists because this kernel has no netem (`tc qdisc add … netem` fails: "Specified qdisc
//! kind is unknown"), the usual way to slow a link. `scripts/ha-cluster.sh nemesis
//! slow-db-link` starts it inside a network namespace (a netlink socket serves the namespace it
//! was opened in) and sends the link's packets to it with
//! `iptables … -j NFQUEUE --queue-num QUEUE --queue-bypass`: with no delayer bound the kernel
//! lets packets pass rather than drop them. Verdicts are issued out of order, by packet id, each
//! when its own delay is over, so jitter reorders packets as a real path can. Only the packets'
//! metadata is copied to userspace; a full kernel queue drops packets, as a router's full buffer
//! does. Prints `nfqueue-delay: queue Q bound, DELAY±JITTER ms` once bound, and each 10 s in
//! which packets passed, how many; runs until killed (packets held then are dropped, and their
//! senders retransmit: stop the iptables rule first and wait out the delay to avoid that).

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::time::{Duration, Instant};

use nfq::{Queue, Verdict};
use rand::Rng;

/// How long the loop sleeps when no packet is queued and none is due sooner: the socket is
/// read without blocking (one thread must both read packets and issue verdicts), so this bounds
/// the delay's own error.
const POLL: Duration = Duration::from_millis(1);
/// Packets the kernel holds for us before it drops new ones.
const QUEUE_MAX_LEN: u32 = 16_384;

fn usage() -> ! {
    eprintln!("usage: nfqueue-delay QUEUE DELAY_MS JITTER_MS");
    std::process::exit(2);
}

fn main() -> std::io::Result<()> {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|text| text.parse().unwrap_or_else(|_| usage()))
        .collect();
    let [queue_num, delay_ms, jitter_ms] = args[..] else {
        usage()
    };
    let queue_num = u16::try_from(queue_num).unwrap_or_else(|_| usage());
    let (low, high) = (delay_ms.saturating_sub(jitter_ms), delay_ms + jitter_ms);

    let mut queue = Queue::open()?;
    queue.bind(queue_num)?;
    // Metadata only: the verdict needs the packet's id, not its bytes.
    queue.set_copy_range(queue_num, 0)?;
    queue.set_queue_max_len(queue_num, QUEUE_MAX_LEN)?;
    queue.set_nonblocking(true);
    println!("nfqueue-delay: queue {queue_num} bound, {delay_ms}±{jitter_ms} ms");

    let mut rng = rand::rng();
    // Held packets by the instant they are due, then by arrival (two may share an instant).
    let mut held = BTreeMap::new();
    let mut arrivals: u64 = 0;
    let mut passed: u64 = 0;
    let mut last_report = (Instant::now(), 0);
    loop {
        let mut received = false;
        loop {
            match queue.recv() {
                Ok(message) => {
                    let delay = Duration::from_millis(rng.random_range(low..=high));
                    held.insert((Instant::now() + delay, arrivals), message);
                    arrivals += 1;
                    received = true;
                }
                Err(error) if error.kind() == ErrorKind::WouldBlock => break,
                Err(error) if error.kind() == ErrorKind::Interrupted => continue,
                Err(error) => return Err(error),
            }
        }
        let now = Instant::now();
        while let Some(entry) = held.first_entry() {
            if entry.key().0 > now {
                break;
            }
            let mut message = entry.remove();
            message.set_verdict(Verdict::Accept);
            queue.verdict(message)?;
            passed += 1;
        }
        if now.duration_since(last_report.0) >= Duration::from_secs(10) {
            if passed != last_report.1 {
                println!(
                    "nfqueue-delay: {} packets passed, {} held",
                    passed,
                    held.len()
                );
            }
            last_report = (now, passed);
        }
        if !received {
            let next_due = held
                .first_key_value()
                .map_or(POLL, |((due, _), _)| due.saturating_duration_since(now));
            std::thread::sleep(next_due.min(POLL));
        }
    }
}
