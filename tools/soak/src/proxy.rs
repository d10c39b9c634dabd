//! [`Proxy`]: a TCP load balancer on 127.0.0.1, as a deployment puts in front of its replicas.
//! Each new connection goes to the next upstream that accepts it, round robin; an upstream that
//! is down (killed, restarting) is skipped. Upstreams change as processes restart on new ports,
//! while the proxy's own address stays put, so clients (and the edge) never learn of restarts
//! except as failed connections.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// How long a connection to one upstream may take before the next is tried.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// The upstreams, by slot; `None` while a slot's process is down.
type Upstreams = Arc<Mutex<Vec<Option<SocketAddr>>>>;

/// A running proxy; stops when dropped.
#[derive(Debug)]
pub struct Proxy {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    upstreams: Upstreams,
    accepting: JoinHandle<()>,
}

impl Proxy {
    /// Listens on a free port of 127.0.0.1, in front of `slots` upstreams (none set yet).
    pub async fn start(slots: usize) -> anyhow::Result<Proxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let upstreams: Upstreams = Arc::new(Mutex::new(vec![None; slots]));
        let accepting = tokio::spawn(accept(listener, Arc::clone(&upstreams)));
        Ok(Proxy {
            url,
            upstreams,
            accepting,
        })
    }

    /// Sets the upstream of `slot`: the address a (re)started process listens on, or `None`.
    pub fn set(&self, slot: usize, upstream: Option<SocketAddr>) {
        self.upstreams
            .lock()
            .unwrap_or_else(PoisonError::into_inner)[slot] = upstream;
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

async fn accept(listener: TcpListener, upstreams: Upstreams) {
    let next = Arc::new(AtomicUsize::new(0));
    while let Ok((client, _)) = listener.accept().await {
        let (upstreams, next) = (Arc::clone(&upstreams), Arc::clone(&next));
        tokio::spawn(async move {
            let Some(mut server) = connect_round_robin(&upstreams, &next).await else {
                return; // Every upstream is down: the client sees the connection close.
            };
            let mut client = client;
            let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
        });
    }
}

/// A connection to the next upstream that takes one, starting after the last one used.
async fn connect_round_robin(upstreams: &Upstreams, next: &AtomicUsize) -> Option<TcpStream> {
    let candidates: Vec<Option<SocketAddr>> = upstreams
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    let start = next.fetch_add(1, Ordering::Relaxed);
    for offset in 0..candidates.len() {
        let Some(address) = candidates[(start + offset) % candidates.len()] else {
            continue;
        };
        if let Ok(Ok(stream)) =
            tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(address)).await
        {
            return Some(stream);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// An upstream that replies to every connection with its own name.
    async fn named_upstream(name: &'static str) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let _ = stream.write_all(name.as_bytes()).await;
            }
        });
        address
    }

    async fn read_through(proxy: &Proxy) -> String {
        let address = proxy.url.trim_start_matches("http://");
        let mut stream = TcpStream::connect(address).await.expect("connect");
        let mut reply = String::new();
        let _ = stream.read_to_string(&mut reply).await;
        reply
    }

    #[tokio::test]
    async fn connections_go_round_robin_and_skip_a_slot_that_is_down() {
        let proxy = Proxy::start(2).await.expect("proxy");
        proxy.set(0, Some(named_upstream("a").await));
        proxy.set(1, Some(named_upstream("b").await));
        let mut seen: Vec<String> = Vec::new();
        for _ in 0..4 {
            seen.push(read_through(&proxy).await);
        }
        seen.sort();
        assert_eq!(seen, ["a", "a", "b", "b"]);
        // A slot whose process died on a port nobody listens on is skipped too.
        let gone = {
            let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
            listener.local_addr().expect("address")
        };
        proxy.set(1, Some(gone));
        for _ in 0..3 {
            assert_eq!(read_through(&proxy).await, "a");
        }
    }
}
