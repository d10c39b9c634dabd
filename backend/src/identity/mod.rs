//! Who a request comes from: customers' and operators' bearer tokens, checked against the
//! identity provider's published keys or an HS256 secret with `shared`'s rules, and the edge's
//! proof that a public API request came through it.

mod edge_proofs;
mod operators;
mod provider_keys;
mod signatures;
mod tokens;

pub use edge_proofs::EdgeProofs;
pub use operators::{
    DEFAULT_MAX_LIFETIME, DEFAULT_OPERATOR_ROLE, DEFAULT_ROLE_CLAIM, DEVELOPMENT_OPERATOR_SECRET,
    OPERATOR_SECRET_SETTING, Operator, OperatorRules, OperatorTokens, Refusal,
    check_operator_secret,
};
pub use provider_keys::{KeySource, ProviderKeys};
pub use tokens::{CustomerTokens, Signing};
