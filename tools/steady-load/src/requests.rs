//! The requests `steady-load` sends, one kind a run: a new-key payment (a fresh key and bill
//! each time), a replay of one finished key, or `GET /healthz`. Everything that is the same for
//! every request (the host, the token, the replayed key) is made into header values once.

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{self, HeaderName, HeaderValue};
use hyper::{Method, Request, Uri};

/// Every payment pays the same amount from the same account.
const BODY: &str = r#"{"amount_paise":230000,"payer_vpa":"asha@okbank"}"#;
/// The bill the replayed key paid (`bench/lib.sh` pays `elec-replay` with it).
const REPLAYED_BILL_PATH: &str = "/v1/bills/elec-replay/pay";
const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// What a run sends.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Traffic {
    /// A new payment each time: a fresh `Idempotency-Key` and bill.
    NewKey,
    /// One finished key, repeated.
    Replay,
    /// `GET /healthz`, the server's baseline.
    Healthz,
}

/// Builds each request of a run.
pub struct Requests {
    traffic: Traffic,
    host: HeaderValue,
    authorization: HeaderValue,
    /// The key `Traffic::Replay` repeats.
    replay_key: Option<HeaderValue>,
}

impl Requests {
    /// The requests of `traffic` to the server at `host` (`127.0.0.1:18080`), as the customer
    /// whose bearer token is `token`; `replay_key` is required for replays.
    pub fn new(
        traffic: Traffic,
        host: &str,
        token: &str,
        replay_key: Option<&str>,
    ) -> Result<Requests, String> {
        let header = |what: &str, value: String| {
            HeaderValue::try_from(value).map_err(|_| format!("{what} is not a valid header value"))
        };
        let replay_key = match (traffic, replay_key) {
            (Traffic::Replay, None) => return Err("replays need --replay-key".to_owned()),
            (_, key) => key
                .map(|key| header("--replay-key", key.to_owned()))
                .transpose()?,
        };
        Ok(Requests {
            traffic,
            host: header("the API's host", host.to_owned())?,
            authorization: header("--token", format!("Bearer {token}"))?,
            replay_key,
        })
    }

    /// Request `index` of the run.
    pub fn build(&self, index: u64) -> Request<Full<Bytes>> {
        let (path, key) = match (self.traffic, &self.replay_key) {
            (Traffic::Healthz, _) => {
                return self.request(Method::GET, Uri::from_static("/healthz"), "");
            }
            (Traffic::Replay, Some(key)) => (Uri::from_static(REPLAYED_BILL_PATH), key.clone()),
            _ => (
                Uri::try_from(format!("/v1/bills/steady-{index}/pay"))
                    .expect("a path of letters, digits and dashes"),
                HeaderValue::try_from(uuid::Uuid::new_v4().to_string())
                    .expect("a UUID's letters, digits and dashes"),
            ),
        };
        let mut request = self.request(Method::POST, path, BODY);
        let headers = request.headers_mut();
        headers.insert(header::AUTHORIZATION, self.authorization.clone());
        headers.insert(IDEMPOTENCY_KEY, key);
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        request
    }

    fn request(&self, method: Method, path: Uri, body: &'static str) -> Request<Full<Bytes>> {
        let mut request = Request::new(Full::new(Bytes::from_static(body.as_bytes())));
        *request.method_mut() = method;
        *request.uri_mut() = path;
        request
            .headers_mut()
            .insert(header::HOST, self.host.clone());
        request
    }
}
