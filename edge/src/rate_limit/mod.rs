//! Rate limits at the edge, as plain values (SPEC §4: "a user over the edge's rate limit").
//!
//! Two limits, each a token bucket ([`TokenBucket`]) kept in memory by one Durable Object per
//! [`Requester`]:
//!
//! - **per client address**, before anything else is looked at (`CF-Connecting-IP`; an IPv6
//!   address counts by its /64; without the header every request shares one bucket), so a
//!   flood from one machine never reaches the token check, the key's object or the backend;
//! - **per user**, for a well-formed attempt at a guarded operation, after authentication and
//!   before the key's object: "a few payments per second" for one customer however many
//!   devices or addresses they use.
//!
//! A request over either limit gets 429 `rate-limited` with `Retry-After` (the time until
//! the bucket holds a token again) and goes no further: its key is untouched, so the same request
//! sent later is handled as usual. The Worker sends the limit with every message
//! ([`TakeRequest`]), so the objects need no settings of their own.

mod bucket;
mod protocol;
mod requester;

pub use bucket::{Admission, Limit, TokenBucket};
pub use protocol::{TAKE_PATH, TakeRequest, TakeVerdict};
pub use requester::{CLIENT_ADDRESS_HEADER, ClientAddress, Requester};
