//! A corpus of mutated requests, the same for the backend's and the edge's bad-input tests: what
//! a broken or hostile client sends (methods, paths, header values, bodies), each sent over a raw
//! socket, because an HTTP client library refuses to send many of them. The promise they test:
//! nothing a client sends gets a 5xx but 503 (a passing outage), and every reply is
//! a well-formed HTTP response.
//!
//! The corpus is seeded ([`mutated_requests`]), so a failing case is reproduced by its index.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One request, as raw as it goes on the wire.
#[derive(Debug, Clone)]
pub struct RawRequest {
    /// The method token (not always a valid one).
    pub method: String,
    /// The request target.
    pub target: String,
    /// Header names and raw values (`Content-Length` and `Connection` are added when sent).
    pub headers: Vec<(String, Vec<u8>)>,
    /// The body.
    pub body: Vec<u8>,
}

impl RawRequest {
    /// The request's bytes, with `Host`, `Content-Length` and `Connection: close`.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes =
            format!("{} {} HTTP/1.1\r\nHost: test\r\n", self.method, self.target).into_bytes();
        for (name, value) in &self.headers {
            bytes.extend_from_slice(name.as_bytes());
            bytes.extend_from_slice(b": ");
            bytes.extend_from_slice(value);
            bytes.extend_from_slice(b"\r\n");
        }
        bytes.extend_from_slice(
            format!(
                "Content-Length: {}\r\nConnection: close\r\n\r\n",
                self.body.len()
            )
            .as_bytes(),
        );
        bytes.extend_from_slice(&self.body);
        bytes
    }

    /// A one-line description for a failure message.
    pub fn describe(&self) -> String {
        let headers: Vec<String> = self
            .headers
            .iter()
            .map(|(name, value)| format!("{name}: {}", String::from_utf8_lossy(value)))
            .collect();
        let body = String::from_utf8_lossy(&self.body);
        let body: String = body.chars().take(120).collect();
        format!(
            "{} {} [{}] body {body:?}",
            self.method,
            self.target,
            headers.join("; ")
        )
    }
}

/// A reply read off the socket.
#[derive(Debug, Clone)]
pub struct RawReply {
    /// Its status code.
    pub status: u16,
    /// Everything the server sent, as text.
    pub text: String,
}

impl RawReply {
    /// Whether the reply is one of ours: a problem+json body.
    pub fn is_problem(&self) -> bool {
        self.text
            .to_ascii_lowercase()
            .contains("content-type: application/problem+json")
    }
}

/// Whether `method` is one of HTTP's standard methods, as spelt in RFC 9110 (upper case).
pub fn is_standard_method(method: &str) -> bool {
    [
        "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH",
    ]
    .contains(&method)
}

/// Sends `request` to `addr` (`HOST:PORT`) on a fresh connection and returns the reply, or
/// `None` if no well-formed status line came back within ten seconds.
pub async fn send_raw(addr: &str, request: &RawRequest) -> Option<RawReply> {
    let exchange = async {
        let mut stream = TcpStream::connect(addr).await.ok()?;
        stream.write_all(&request.to_bytes()).await.ok()?;
        let mut reply = Vec::new();
        // A server may close while the body is still being sent; what it replied counts.
        let _ = stream.read_to_end(&mut reply).await;
        let text = String::from_utf8_lossy(&reply).into_owned();
        let status_line = text.lines().next()?;
        let mut parts = status_line.split(' ');
        (parts.next()? == "HTTP/1.1").then_some(())?;
        let status = parts.next()?.parse().ok()?;
        Some(RawReply { status, text })
    };
    tokio::time::timeout(Duration::from_secs(10), exchange)
        .await
        .ok()
        .flatten()
}

/// A small seeded generator (xorshift64*): the corpus is the same on every run.
struct Dice(u64);

impl Dice {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % u64::try_from(n).unwrap_or(1)).unwrap_or(0)
    }

    fn pick<'a, T>(&mut self, from: &'a [T]) -> &'a T {
        &from[self.below(from.len())]
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

const METHODS: &[&str] = &[
    "POST", "POST", "POST", "GET", "GET", "HEAD", "PUT", "PATCH", "DELETE", "OPTIONS", "post",
    "FOO", "TRACE",
];

const BILL_IDS: &[&str] = &[
    "elec-1",
    "",
    "%00",
    "%2F..%2F",
    "a%20b",
    "%E2%82%AC",
    "%FF%FE",
    "..",
    "x?y=1",
    "elec-1#frag",
];

const KEYS: &[&[u8]] = &[
    b"8e03978e-40d5-43e8-bc93-6894a57f9324",
    b"\"8e03978e-40d5-43e8-bc93-6894a57f9324\"",
    b"",
    b"\"",
    b"not-a-uuid",
    b"c232ab00-9414-11ec-b3c8-9f6bdeced846",
    b"8e03978e-40d5-43e8-bc93-6894a57f9324, 8e03978e-40d5-43e8-bc93-6894a57f9325",
    b"\xff\xfe\xfd",
    b"8e03978e\t40d5-43e8-bc93-6894a57f9324",
    b"(?)",
];

const CONTENT_TYPES: &[&[u8]] = &[b"text/plain", b"application/json; charset=latin1", b"\x01"];

const PREFERS: &[&[u8]] = &[
    b"wait=1",
    b"wait=-3",
    b"wait=99999999999999999999",
    b"wait=\"2\"",
    b"respond-async, wait=0",
];

const REQUEST_IDS: &[&[u8]] = &[b"", b"\xc3\xa9", b"a b c"];

const BODIES: &[&[u8]] = &[
    br#"{"amount_paise":230000,"payer_vpa":"asha@okbank"}"#,
    br#"{"amount_paise":230000.0,"payer_vpa":"asha@okbank"}"#,
    br#"{"amount_paise":-1,"payer_vpa":"asha@okbank"}"#,
    br#"{"amount_paise":99999999999999999999999,"payer_vpa":"asha@okbank"}"#,
    br#"{"amount_paise":"230000","payer_vpa":"asha@okbank"}"#,
    br#"{"amount_paise":230000,"payer_vpa":"asha\u0000@okbank"}"#,
    br#"{"amount_paise":230000,"payer_vpa":"asha@okbank","extra":true}"#,
    br#"{"amount_paise":230000,"amount_paise":1,"payer_vpa":"asha@okbank"}"#,
    br#"{"amount_paise":50000}"#,
    br#"{"amount_paise":230000,"payer_vpa":"#,
    b"[]",
    b"null",
    b"",
    b"\xff\xfe{}",
    br#"{"a":"\ud800"}"#,
];

/// `count` mutated requests from `seed`: each a valid payment (fresh key, `token` a valid bearer
/// token) with one to three of its parts mutated (method, path, key, token, content type,
/// `Prefer`, request id, body), so each refusal is reached and some payments go through.
pub fn mutated_requests(seed: u64, count: usize, token: &str) -> Vec<RawRequest> {
    let mut dice = Dice(seed.max(1));
    (0..count).map(|_| one_mutation(&mut dice, token)).collect()
}

/// A valid payment with a fresh key, then one to three of its parts mutated.
fn one_mutation(dice: &mut Dice, token: &str) -> RawRequest {
    let mut request = RawRequest {
        method: "POST".to_owned(),
        target: "/v1/bills/elec-1/pay".to_owned(),
        headers: vec![
            (
                "Authorization".to_owned(),
                format!("Bearer {token}").into_bytes(),
            ),
            ("Idempotency-Key".to_owned(), fresh_key(dice).into_bytes()),
            ("Content-Type".to_owned(), b"application/json".to_vec()),
        ],
        body: BODIES[0].to_vec(),
    };
    for _ in 0..=dice.below(3) {
        mutate(dice, token, &mut request);
    }
    request
}

/// A v4 UUID from the dice.
fn fresh_key(dice: &mut Dice) -> String {
    let (high, low) = (dice.next(), dice.next());
    let bits = (u128::from(high) << 64 | u128::from(low)) & !(0xf000 << 64) & !(0xc << 60);
    let bits = bits | (0x4000 << 64) | (0x8 << 60);
    let hex = format!("{bits:032x}");
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// Sets header `name` to `value`, replacing it (or adds a second one when `again`).
fn set_header(request: &mut RawRequest, name: &str, value: Vec<u8>, again: bool) {
    if !again {
        request.headers.retain(|(header, _)| header != name);
    }
    request.headers.push((name.to_owned(), value));
}

/// Mutates one part of `request`.
fn mutate(dice: &mut Dice, token: &str, request: &mut RawRequest) {
    match dice.below(9) {
        0 => request.method = (*dice.pick(METHODS)).to_owned(),
        1 => {
            request.target = match dice.below(6) {
                0 | 1 => format!("/v1/bills/{}/pay", dice.pick(BILL_IDS)),
                2 => format!("/v1/payments/{}/refunds", dice.pick(BILL_IDS)),
                3 => format!("/v1/payments/{}", dice.pick(BILL_IDS)),
                4 => {
                    let key = *dice.pick(KEYS);
                    let key = String::from_utf8_lossy(key);
                    let key = key.replace(|c: char| !c.is_ascii_graphic(), "%20");
                    format!("/v1/idempotency-keys/{key}")
                }
                _ => (*dice.pick(&[
                    "/",
                    "//v1//bills//pay",
                    "/v1/bills/elec-1/pay/extra",
                    "/v2/x",
                ]))
                .to_owned(),
            }
        }
        2 => {
            let again = dice.chance(30);
            set_header(request, "Idempotency-Key", dice.pick(KEYS).to_vec(), again);
        }
        3 => match dice.below(4) {
            0 => request.headers.retain(|(name, _)| name != "Authorization"),
            1 => set_header(request, "Authorization", b"Bearer".to_vec(), false),
            2 => set_header(
                request,
                "Authorization",
                format!("Bearer {token}x").into_bytes(),
                false,
            ),
            _ => set_header(
                request,
                "Authorization",
                format!("Basic {token}").into_bytes(),
                false,
            ),
        },
        4 => set_header(
            request,
            "Content-Type",
            dice.pick(CONTENT_TYPES).to_vec(),
            false,
        ),
        5 => set_header(request, "Prefer", dice.pick(PREFERS).to_vec(), false),
        6 => set_header(
            request,
            "X-Request-Id",
            dice.pick(REQUEST_IDS).to_vec(),
            false,
        ),
        7 => request.body = dice.pick(BODIES).to_vec(),
        _ => match dice.below(3) {
            0 => request.body = "[".repeat(40).into_bytes(),
            1 => request.body = vec![b'x'; 20 * 1024],
            _ if !request.body.is_empty() => {
                let at = dice.below(request.body.len());
                request.body[at] = u8::try_from(dice.below(256)).unwrap_or(0);
            }
            _ => {}
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_corpus_is_the_same_for_a_seed_and_differs_between_seeds() {
        let first = mutated_requests(7, 50, "t");
        let again = mutated_requests(7, 50, "t");
        let other = mutated_requests(8, 50, "t");
        let bytes = |corpus: &[RawRequest]| -> Vec<Vec<u8>> {
            corpus.iter().map(RawRequest::to_bytes).collect()
        };
        assert_eq!(bytes(&first), bytes(&again));
        assert_ne!(bytes(&first), bytes(&other));
    }

    #[test]
    fn the_corpus_covers_methods_paths_and_bodies() {
        let corpus = mutated_requests(1, 1_500, "t");
        for method in ["POST", "GET", "HEAD", "TRACE", "FOO"] {
            assert!(corpus.iter().any(|r| r.method == method), "{method}");
        }
        assert!(
            corpus
                .iter()
                .any(|r| r.method == "GET" && !r.body.is_empty() && r.target.ends_with("/pay"))
        );
        assert!(corpus.iter().any(|r| r.body.len() > 16 * 1024));
    }
}
