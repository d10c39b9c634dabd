//! [`LostReplyProxy`]: a TCP proxy in front of PostgreSQL that can lose the reply to one
//! statement, as a failover does when the primary dies between a commit and its reply.
//!
//! Armed with a piece of SQL ([`LostReplyProxy::lose_the_reply_to`]), it reads the client's
//! side of the PostgreSQL protocol (plaintext only: give the client `sslmode=disable`): a
//! `Parse` message whose query holds that SQL names a prepared statement; the next `Bind` of
//! that statement on the same connection is the statement's execution. That execution is
//! forwarded, so the server runs it and commits, but from then on nothing the server sends
//! reaches the client, and a moment later both sides are closed (or after a hold the test
//! chooses, [`LostReplyProxy::lose_the_reply_and_hold`]: a link cut off for that long). The
//! client sees a connection that broke while its statement ran; the database holds whatever the
//! statement wrote.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How long after the lost statement is forwarded the connection is closed: time enough for
/// the server to run it and commit.
const CLOSE_AFTER: Duration = Duration::from_millis(500);

/// The statement whose reply is to be lost, and how long its connection is held before it is
/// closed.
#[derive(Debug)]
struct Armed {
    sql: String,
    close_after: Duration,
}

/// The proxy, listening on 127.0.0.1; it stops with the test's runtime.
#[derive(Debug, Clone)]
pub struct LostReplyProxy {
    address: SocketAddr,
    armed: Arc<Mutex<Option<Armed>>>,
    replies_lost: Arc<AtomicUsize>,
}

impl LostReplyProxy {
    /// Starts a proxy to the PostgreSQL server at `upstream`.
    pub async fn start(upstream: SocketAddr) -> LostReplyProxy {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy");
        let proxy = LostReplyProxy {
            address: listener.local_addr().expect("a bound address"),
            armed: Arc::default(),
            replies_lost: Arc::default(),
        };
        let accepting = proxy.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(upstream).await else {
                    continue;
                };
                tokio::spawn(accepting.clone().relay(client, server));
            }
        });
        proxy
    }

    /// `database_url` with its host and port replaced by the proxy's, and TLS off so the proxy
    /// can read the statements.
    pub fn url_for(&self, database_url: &str) -> String {
        let (scheme, rest) = database_url.split_once("://").expect("a URL with a scheme");
        let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
        let user = authority
            .rsplit_once('@')
            .map_or(String::new(), |(user, _)| format!("{user}@"));
        let separator = if path.contains('?') { '&' } else { '?' };
        format!(
            "{scheme}://{user}{}/{path}{separator}sslmode=disable",
            self.address
        )
    }

    /// Loses the reply to the next execution of a statement whose SQL contains `sql`.
    pub fn lose_the_reply_to(&self, sql: &str) {
        self.lose_the_reply_and_hold(sql, CLOSE_AFTER);
    }

    /// As [`LostReplyProxy::lose_the_reply_to`], but the connection is held open, silent,
    /// for `hold` before it is closed: a link cut off for that long, whose client learns of it
    /// only then.
    pub fn lose_the_reply_and_hold(&self, sql: &str, hold: Duration) {
        let armed = Armed {
            sql: sql.to_owned(),
            close_after: hold.max(CLOSE_AFTER),
        };
        *self.armed.lock().unwrap_or_else(PoisonError::into_inner) = Some(armed);
    }

    /// How many replies were lost so far.
    pub fn replies_lost(&self) -> usize {
        self.replies_lost.load(Ordering::SeqCst)
    }

    async fn relay(self, client: TcpStream, server: TcpStream) {
        let (mut client_reads, mut client_writes) = client.into_split();
        let (mut server_reads, mut server_writes) = server.into_split();
        let losing = Arc::new(AtomicBool::new(false));
        let to_client = {
            let losing = Arc::clone(&losing);
            async move {
                let mut buffer = vec![0; 16 * 1024];
                loop {
                    let read = server_reads.read(&mut buffer).await.unwrap_or(0);
                    if read == 0 {
                        return;
                    }
                    if losing.load(Ordering::SeqCst) {
                        continue;
                    }
                    if client_writes.write_all(&buffer[..read]).await.is_err() {
                        return;
                    }
                }
            }
        };
        let to_server = async move {
            let mut messages = FrontendMessages::default();
            let mut buffer = vec![0; 16 * 1024];
            loop {
                let read = client_reads.read(&mut buffer).await.unwrap_or(0);
                if read == 0 {
                    return;
                }
                let lose = messages.feed(&buffer[..read], &self.armed);
                if lose.is_some() {
                    losing.store(true, Ordering::SeqCst);
                }
                if server_writes.write_all(&buffer[..read]).await.is_err() {
                    return;
                }
                if let Some(close_after) = lose {
                    tokio::time::sleep(close_after).await;
                    self.replies_lost.fetch_add(1, Ordering::SeqCst);
                    return;
                }
            }
        };
        // Whichever side ends first ends the connection: both halves are dropped, so closed.
        tokio::select! {
            () = to_client => {}
            () = to_server => {}
        }
    }
}

/// The client's messages as they stream by: just enough of the protocol to see which prepared
/// statement holds the armed SQL, and when it is bound to run.
#[derive(Debug, Default)]
struct FrontendMessages {
    pending: Vec<u8>,
    started: bool,
    watched_statement: Option<Vec<u8>>,
}

impl FrontendMessages {
    /// Takes in `bytes`; if they hold the execution whose reply must be lost (which disarms
    /// the proxy), how long to hold its connection before closing it.
    fn feed(&mut self, bytes: &[u8], armed: &Mutex<Option<Armed>>) -> Option<Duration> {
        self.pending.extend_from_slice(bytes);
        let mut lose = None;
        loop {
            // The startup message has no type byte: a length, then its body.
            let header = if self.started { 5 } else { 4 };
            if self.pending.len() < header {
                break;
            }
            let length_at = header - 4;
            let length = u32::from_be_bytes(
                self.pending[length_at..length_at + 4]
                    .try_into()
                    .expect("four bytes"),
            ) as usize;
            let total = length_at + length;
            if self.pending.len() < total {
                break;
            }
            let message: Vec<u8> = self.pending.drain(..total).collect();
            if !self.started {
                self.started = true;
                continue;
            }
            lose = lose.or(self.look_at(message[0], &message[5..], armed));
        }
        lose
    }

    fn look_at(&mut self, kind: u8, body: &[u8], armed: &Mutex<Option<Armed>>) -> Option<Duration> {
        let mut fields = body.split(|byte| *byte == 0);
        let mut armed = armed.lock().unwrap_or_else(PoisonError::into_inner);
        let Armed { sql, close_after } = armed.as_ref()?;
        let close_after = *close_after;
        match kind {
            b'P' => {
                let statement = fields.next().unwrap_or_default();
                let query = String::from_utf8_lossy(fields.next().unwrap_or_default());
                if query.contains(sql.as_str()) {
                    self.watched_statement = Some(statement.to_vec());
                }
                None
            }
            b'B' => {
                let _portal = fields.next();
                let statement = fields.next().unwrap_or_default();
                if self.watched_statement.as_deref() == Some(statement) {
                    *armed = None;
                    return Some(close_after);
                }
                None
            }
            _ => None,
        }
    }
}
