//! The partner bank: the port the flows and the reconciler speak ([`BankPort`]), its first
//! adapter ([`BankApiHttp`], the `bank-api` contract over HTTP), and the [`Bank`] they hold,
//! which keeps the port within its bounds and behind a circuit breaker
//! (docs/design.md, "The bank port").

mod bank_api_http;
mod breaker;
mod guarded;
mod port;

pub use bank_api_http::{BankApiHttp, MAX_REPLY_BYTES, NOT_EXECUTED};
pub use breaker::{BreakerSettings, BreakerState};
pub use guarded::{Admitted, Bank, BankBounds, BankUnavailable, CallPermit};
pub use port::{BankPort, CallOutcome, LookUp, LookUpError, MoneyCall};
