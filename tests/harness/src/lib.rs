//! The test harness every suite of this workspace shares (the backend's, the edge's, the
//! tools'), so each concern is solved once:
//! - [`TestDatabase`]: a fresh PostgreSQL database per test, dropped when the test ends;
//! - [`ServerProcess`]: a server binary as a child process that binds port 0 itself and reports
//!   its address on a fixed line (`… listening on http://ADDR`), never a port picked by
//!   binding and freeing; killed with its process group when dropped;
//! - [`Received`]: what a test client received, read whole, with the assertions the contract needs;
//! - [`wait_for`] and [`metric_in`]: bounded polling and reading a Prometheus series;
//! - [`HaCluster`]: a replicated PostgreSQL (Patroni, etcd, HAProxy) of `scripts/ha-cluster.sh`,
//!   for the failover suite and the HA soak, on loopback or in network namespaces
//!   ([`Namespaces`]) the soak partitions;
//! - [`IdentityProvider`] and [`SigningKey`]: a JWKS endpoint whose keys a test publishes,
//!   rotates or takes away, and the RS256 and ES256 keys that sign its tokens;
//! - [`LostReplyProxy`]: a proxy in front of PostgreSQL that loses the reply to one
//!   statement, as a failover between a commit and its reply does;
//! - [`BankGateway`]: an HTTP gateway in front of the bank simulator that fails as a real
//!   bank's front door does ([`GatewayMode`]: down, 503 after forwarding, redirects, huge
//!   replies, another payment's reference), which the simulator itself never does;
//! - [`TestCa`] and [`TlsPostgres`]: a certificate authority made per test, and a throwaway
//!   PostgreSQL cluster that speaks TLS only, for the TLS tests;
//! - [`OtlpReceiver`]: an OTLP/HTTP trace receiver that keeps the spans it is sent;
//! - [`workerd`]: the built edge Worker under `workerd`;
//! - [`browser`]: headless Chromium over WebDriver, for the page tests;
//! - [`mutations`]: a seeded corpus of mutated requests for the bad-input tests of edge and
//!   backend alike, sent over raw sockets.

mod bank_gateway;
pub mod browser;
mod certificates;
mod database;
mod ha_cluster;
mod identity_provider;
mod lost_reply_proxy;
pub mod mutations;
mod otlp_receiver;
mod process;
mod received;
mod tls_postgres;
mod wait;
pub mod workerd;

pub use bank_gateway::{BankGateway, GatewayMode};
pub use certificates::{LOCAL_NAMES, ServerIdentity, TestCa};
pub use database::{TestDatabase, admin_url};
pub use ha_cluster::{
    BackendNamespace, HaCluster, HaMode, Namespace, NamespaceSettings, Namespaces, url_of_database,
};
pub use identity_provider::{IdentityProvider, PROVIDER_SUBJECTS, SigningKey};
pub use lost_reply_proxy::LostReplyProxy;
pub use otlp_receiver::{OtlpReceiver, ReceivedSpan};
pub use process::{ServerProcess, listening_url, listening_urls, server_binary};
pub use received::Received;
pub use tls_postgres::TlsPostgres;
pub use wait::{metric_in, wait_for};
