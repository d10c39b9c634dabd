//! [`IdentityProvider`]: an identity provider for the tests, as a real one looks from outside:
//! a JWKS served over HTTP on 127.0.0.1 (with `Cache-Control: max-age`), whose keys the test
//! publishes and rotates, which can be made unreachable, and which counts the fetches it
//! replied; and [`SigningKey`]s made per test (RSA 2048 by `openssl genpkey`, P-256 by `ring`)
//! that sign RS256 and ES256 tokens with any header and claims, good or not; and
//! [`PROVIDER_SUBJECTS`], users as providers name them.

use std::net::SocketAddr;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::rand::SystemRandom;
use ring::rsa::PublicKeyComponents;
use ring::signature::{
    ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair, RSA_PKCS1_SHA256, RsaKeyPair,
};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Subjects (`sub`) as identity providers issue them: Auth0's (`auth0|…`), a Firebase uid (28
/// characters), a Cognito or Keycloak UUID, and two that differ only as strings (`42`, `042`).
pub const PROVIDER_SUBJECTS: [&str; 5] = [
    "auth0|64b1f3a2c9e77d0012345678",
    "Xq3fGk9LmP2rTn8VwZy4Ab1CdE7h",
    "8e03978e-40d5-43e8-bc93-6894a57f9324",
    "42",
    "042",
];
use tokio::net::TcpListener;

/// A private key a test signs tokens with.
pub struct SigningKey {
    kid: String,
    pair: Pair,
}

enum Pair {
    Rsa(RsaKeyPair),
    Ec(EcdsaKeyPair),
}

impl SigningKey {
    /// A fresh 2048-bit RSA key (RS256), made by `openssl genpkey`.
    pub fn rsa(kid: &str) -> SigningKey {
        let output = Command::new("openssl")
            .args([
                "genpkey",
                "-algorithm",
                "RSA",
                "-outform",
                "DER",
                "-pkeyopt",
            ])
            .arg("rsa_keygen_bits:2048")
            .output()
            .expect("openssl makes the test's RSA keys");
        assert!(output.status.success(), "openssl genpkey failed");
        let pair = RsaKeyPair::from_pkcs8(&output.stdout)
            .or_else(|_| RsaKeyPair::from_der(&output.stdout))
            .expect("openssl's key is PKCS#8");
        SigningKey {
            kid: kid.to_owned(),
            pair: Pair::Rsa(pair),
        }
    }

    /// A fresh P-256 key (ES256).
    pub fn ec(kid: &str) -> SigningKey {
        let random = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &random)
            .expect("a P-256 key");
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &random)
                .expect("the key just made");
        SigningKey {
            kid: kid.to_owned(),
            pair: Pair::Ec(pair),
        }
    }

    /// Its `kid`.
    pub fn kid(&self) -> &str {
        &self.kid
    }

    /// The algorithm its key verifies.
    pub fn alg(&self) -> &'static str {
        match self.pair {
            Pair::Rsa(_) => "RS256",
            Pair::Ec(_) => "ES256",
        }
    }

    /// Its public JWK.
    pub fn jwk(&self) -> Value {
        match &self.pair {
            Pair::Rsa(pair) => {
                let numbers: PublicKeyComponents<Vec<u8>> = pair.public().into();
                json!({
                    "kty": "RSA", "kid": self.kid, "use": "sig", "alg": "RS256",
                    "n": URL_SAFE_NO_PAD.encode(numbers.n), "e": URL_SAFE_NO_PAD.encode(numbers.e),
                })
            }
            Pair::Ec(pair) => {
                let point = pair.public_key().as_ref();
                json!({
                    "kty": "EC", "crv": "P-256", "kid": self.kid, "use": "sig", "alg": "ES256",
                    "x": URL_SAFE_NO_PAD.encode(&point[1..33]),
                    "y": URL_SAFE_NO_PAD.encode(&point[33..65]),
                })
            }
        }
    }

    /// A token of `claims` with this key's algorithm and `kid`.
    pub fn sign(&self, claims: &Value) -> String {
        self.sign_with_header(
            &json!({ "alg": self.alg(), "kid": self.kid, "typ": "JWT" }),
            claims,
        )
    }

    /// A token of `claims` under any `header`, signed with this key's own algorithm whatever the
    /// header says (to see a lying header refused).
    pub fn sign_with_header(&self, header: &Value, claims: &Value) -> String {
        let signing_input = format!("{}.{}", encode(header), encode(claims));
        let random = SystemRandom::new();
        let signature = match &self.pair {
            Pair::Rsa(pair) => {
                let mut signature = vec![0; pair.public().modulus_len()];
                pair.sign(
                    &RSA_PKCS1_SHA256,
                    &random,
                    signing_input.as_bytes(),
                    &mut signature,
                )
                .expect("RSA signs");
                signature
            }
            Pair::Ec(pair) => pair
                .sign(&random, signing_input.as_bytes())
                .expect("ECDSA signs")
                .as_ref()
                .to_vec(),
        };
        format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(signature))
    }
}

fn encode(part: &Value) -> String {
    URL_SAFE_NO_PAD.encode(part.to_string())
}

/// What the provider publishes now.
#[derive(Debug, Clone)]
struct Published {
    jwks: String,
    max_age: Option<u64>,
    reachable: bool,
}

/// The provider's JWKS endpoint, serving until the test's runtime ends.
#[derive(Debug, Clone)]
pub struct IdentityProvider {
    address: SocketAddr,
    published: Arc<Mutex<Published>>,
    fetches: Arc<AtomicUsize>,
}

impl IdentityProvider {
    /// Serves an empty key set on a free port of 127.0.0.1.
    pub async fn start() -> IdentityProvider {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the provider");
        let provider = IdentityProvider {
            address: listener.local_addr().expect("a bound address"),
            published: Arc::new(Mutex::new(Published {
                jwks: json!({ "keys": [] }).to_string(),
                max_age: Some(300),
                reachable: true,
            })),
            fetches: Arc::default(),
        };
        let serving = provider.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let provider = serving.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buffer = [0_u8; 1024];
                    while !head.windows(4).any(|window| window == b"\r\n\r\n") {
                        match stream.read(&mut buffer).await {
                            Ok(0) | Err(_) => return,
                            Ok(read) => head.extend_from_slice(&buffer[..read]),
                        }
                    }
                    let published = provider.lock().clone();
                    if !published.reachable {
                        return; // the connection closes without a reply, as a provider that is down
                    }
                    provider.fetches.fetch_add(1, Ordering::SeqCst);
                    let cache = published.max_age.map_or(String::new(), |age| {
                        format!("cache-control: max-age={age}\r\n")
                    });
                    let response = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{cache}\
                         content-length: {}\r\nconnection: close\r\n\r\n{}",
                        published.jwks.len(),
                        published.jwks
                    );
                    let _ = stream.write_all(response.as_bytes()).await;
                });
            }
        });
        provider
    }

    /// The JWKS URL.
    pub fn jwks_url(&self) -> String {
        format!("http://{}/.well-known/jwks.json", self.address)
    }

    /// Publishes exactly these keys.
    pub fn publish(&self, keys: &[&SigningKey]) {
        let jwks: Vec<Value> = keys.iter().map(|key| key.jwk()).collect();
        self.publish_json(&json!({ "keys": jwks }));
    }

    /// Publishes any document (a JWK of a weak key, say).
    pub fn publish_json(&self, document: &Value) {
        self.lock().jwks = document.to_string();
    }

    /// The `max-age` the responses carry (`None`: no `Cache-Control`).
    pub fn set_max_age(&self, seconds: Option<u64>) {
        self.lock().max_age = seconds;
    }

    /// Makes the provider reply again, or stop replying (connections closed without a reply).
    pub fn set_reachable(&self, reachable: bool) {
        self.lock().reachable = reachable;
    }

    /// How many fetches it replied to.
    pub fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Published> {
        self.published
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}
