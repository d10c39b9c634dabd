//! The contract through the edge: the built Worker (`scripts/build-edge.sh`) under `workerd`,
//! in front of a test's backend, as a phone meets it in production. The backend then requires
//! the edge's proof on every `/v1` request, so a row that passes proves the proof too; a test's
//! customer requests go to [`TestApp::entry_url`](crate::support::TestApp), its reads of rows,
//! ledger and metrics still go straight to the parts that own them.
//!
//! Where a test enters is its [`Entry`]; [`for_each_store_and_entry!`](crate::for_each_store_and_entry)
//! runs a body once per store directly and once per store through the edge in each of the
//! edge's two modes (replies kept, and none kept: the residency mode of docs/edge.md).

use test_harness::ServerProcess;
use test_harness::workerd::{WorkerSettings, repo_root_of, start_workerd};

use crate::support::{SECRET, StoreKind};

/// The edge proof's secret of a backend behind the test's edge.
pub const PROOF_SECRET: &str = "contract-through-the-edge-proof-secret-0123";

/// Where a test's customer requests enter the system.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// The backend's own listener.
    Backend,
    /// The edge Worker, keeping finished replies in its Durable Objects (the default mode).
    EdgeKeepingReplies,
    /// The edge Worker keeping no reply (`EDGE_KEEPS_REPLIES=false`): every repeat of a
    /// finished key is the backend's replay.
    EdgeKeepingNone,
}

/// A store and an entry: one instance of a contract test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Setup {
    /// Where keys and payments are kept.
    pub store: StoreKind,
    /// Where customer requests enter.
    pub entry: Entry,
}

/// A running Worker in front of a backend; stopped when dropped.
pub struct EdgeInFront {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    _workerd: ServerProcess,
    _scratch: tempfile::TempDir,
}

impl EdgeInFront {
    /// Starts the Worker, keeping finished replies or not, forwarding to `backend_url`, with
    /// the test tokens' secret, the proof's secret and limits no contract test reaches.
    pub async fn start(keeps_replies: bool, backend_url: &str) -> EdgeInFront {
        let scratch = tempfile::tempdir().expect("a scratch directory");
        let settings = WorkerSettings {
            backend_url: backend_url.to_owned(),
            backend_timeout_ms: 15_000,
            jwt_secret: Some(SECRET.to_owned()),
            user_limit: UNREACHED_LIMIT,
            address_limit: UNREACHED_LIMIT,
            bindings: (
                edge::runtime::COORDINATOR_BINDING,
                edge::runtime::RATE_LIMITER_BINDING,
                edge::trace::REQUESTS_DATASET_BINDING,
            ),
            extra: vec![
                ("EDGE_PROOF_SECRET", PROOF_SECRET.to_owned()),
                ("EDGE_KEEPS_REPLIES", keeps_replies.to_string()),
            ],
            durable_objects_on_disk: None,
        };
        let repo_root = repo_root_of(env!("CARGO_MANIFEST_DIR"));
        let (workerd, port) = start_workerd(&repo_root, scratch.path(), &settings).await;
        EdgeInFront {
            url: format!("http://127.0.0.1:{port}"),
            _workerd: workerd,
            _scratch: scratch,
        }
    }
}

/// Per minute and burst: the rows send bursts from one user and one address, and are not
/// about rate limits (edge/tests/end_to_end.rs is).
const UNREACHED_LIMIT: (u32, u32) = (1_000_000, 10_000);
