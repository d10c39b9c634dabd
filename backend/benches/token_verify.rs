//! What a bearer token's check costs at the backend, per algorithm, side by side in one run:
//! the whole `CustomerTokens::user_of` (split, key look-up in the cached set, signature, claims)
//! for an HS256 token under a shared secret (the baseline), an RS256 token under a 2048-bit
//! provider key and an ES256 token under a P-256 key, the keys' set already cached.
//!
//! Run: `cargo bench -p backend --bench token_verify` (criterion prints each median; the ratios
//! to HS256 are the figure, docs/figures.md "Token checks").

use std::hint::black_box;
use std::sync::Arc;

use backend::identity::{CustomerTokens, KeySource, ProviderKeys, Signing};
use criterion::Criterion;
use serde_json::json;
use shared::UserId;
use shared::auth::key_cache::CachePolicy;
use shared::auth::{TokenRules, sign_token};
use test_harness::SigningKey;

const USER: u64 = 42;
const SECRET: &[u8] = b"token-bench-secret-of-at-least-32-bytes";

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// Customer tokens checked against `key`'s set, published in a file beside the bench.
fn provider_tokens(key: &SigningKey, folder: &tempfile::TempDir) -> CustomerTokens {
    let path = folder.path().join(format!("{}.json", key.kid()));
    std::fs::write(&path, json!({ "keys": [key.jwk()] }).to_string()).expect("the JWKS file");
    let keys = ProviderKeys::new(
        KeySource::File(path),
        CachePolicy::default(),
        reqwest::Client::new(),
    );
    CustomerTokens::new(Signing::Provider(Arc::new(keys)), TokenRules::default())
}

fn bench_token_checks(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let folder = tempfile::tempdir().expect("a scratch folder");
    let claims = json!({ "sub": USER.to_string(), "exp": now() + 3600 });
    let rsa = SigningKey::rsa("bench-rsa");
    let ec = SigningKey::ec("bench-ec");
    let user = UserId::numbered(USER);
    let cases = [
        (
            "HS256 (shared secret)",
            CustomerTokens::new(Signing::Secret(SECRET.to_vec()), TokenRules::default()),
            sign_token(user.clone(), now() + 3600, SECRET),
        ),
        (
            "RS256 (2048-bit key)",
            provider_tokens(&rsa, &folder),
            rsa.sign(&claims),
        ),
        (
            "ES256 (P-256 key)",
            provider_tokens(&ec, &folder),
            ec.sign(&claims),
        ),
    ];

    let mut group = c.benchmark_group("customer token check");
    for (name, tokens, token) in &cases {
        let authorization = format!("Bearer {token}");
        let check =
            || runtime.block_on(tokens.user_of(Some(black_box(authorization.as_bytes())), now()));
        assert_eq!(
            check().ok().as_ref(),
            Some(&user),
            "{name}: the token is valid"
        );
        group.bench_function(*name, |b| b.iter(check));
    }
    group.finish();
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    bench_token_checks(&mut criterion);
    criterion.final_summary();
}
