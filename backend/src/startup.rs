//! [`Application`]: builds the state from a [`Config`], binds the two listeners (port 0 picks a
//! free one, as tests do): the public API, and the admin listener (metrics, detailed readiness)
//! that only operators reach; then runs both with the background workers until shutdown.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use shared::fingerprint::BodyLimits;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::bank::{Bank, BankApiHttp, BankBounds, BankPort};
use crate::config::Config;
use crate::config::{Identity, TokenKeys};
use crate::identity::{
    CustomerTokens, EdgeProofs, KeySource, OperatorTokens, ProviderKeys, Signing,
};
use crate::ledger_check_bounds::LedgerCheckBounds;
use crate::metrics::Metrics;
use crate::readiness::{self, Readiness};
use crate::replay_cache::ReplayCache;
use crate::shutdown::Shutdown;
use crate::state::{AppState, Parts};
use crate::store::{self, SharedStore};
use crate::trail::Appender;
use crate::{durability, http, janitor, reconcile, transport_security};
use secret_settings::ExposeSecret;

/// How often the database's readiness is checked.
const READINESS_INTERVAL: Duration = Duration::from_secs(1);

/// The backend, built and bound, not yet serving.
pub struct Application {
    listener: TcpListener,
    admin_listener: TcpListener,
    state: AppState,
    config: Config,
}

impl Application {
    /// Connects to the database, applies migrations (or, with `MIGRATE_ON_START=false`, checks
    /// they were applied), and binds both listen addresses.
    pub async fn build(config: Config) -> anyhow::Result<Application> {
        let store = store::connect(
            config.database_url.expose_secret(),
            20,
            config.database_acquire_timeout,
        )
        .await?;
        if config.migrate_on_start {
            store.migrate().await.context("applying migrations")?;
        } else {
            let unapplied = store
                .unapplied_migrations()
                .await
                .context("reading which migrations were applied (MIGRATE_ON_START=false)")?;
            anyhow::ensure!(
                unapplied.is_empty(),
                "MIGRATE_ON_START=false and the database lacks migrations {unapplied:?}: run \
                 `backend migrate` first (with a role that may change the schema)"
            );
        }
        let replication = store
            .replication()
            .await
            .context("reading the database's replication")?;
        durability::check_at_start(config.replication, replication.as_ref())?;
        let state = build_state(&config, store)?;
        let listener = bind(config.listen_addr).await?;
        let admin_listener = bind(config.admin_addr).await?;
        Ok(Application {
            listener,
            admin_listener,
            state,
            config,
        })
    }

    /// The public API's bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// The admin listener's bound address.
    pub fn admin_addr(&self) -> SocketAddr {
        self.admin_listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// The shared state (tests read the store and metrics through it).
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Serves until `shutdown` resolves, then drains as `config::drain` says: not ready at
    /// once, serving on for the grace period; then both listeners stop accepting and finish
    /// their in-flight requests within the deadline, and the workers stop after their current
    /// step.
    pub async fn run_until_stopped(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let stop = Shutdown::default();
        let shared_readiness = Arc::clone(&self.state.readiness);
        let mut workers = tokio::task::JoinSet::new();
        workers.spawn(readiness::run_until_stopped(
            Arc::clone(&self.state.readiness),
            self.state.store.clone(),
            READINESS_INTERVAL,
            stop.wait(),
        ));
        if self.config.run_workers {
            workers.spawn(reconcile::run_until_stopped(
                self.state.clone(),
                self.config.reconcile_interval,
                stop.wait(),
            ));
            workers.spawn(janitor::run_until_stopped(
                self.state.clone(),
                self.config.janitor_interval,
                stop.wait(),
            ));
        }
        let head_deadline = self.config.limits.head_read_timeout;
        let public = http::serve(
            self.listener,
            http::router(self.state.clone()),
            head_deadline,
            stop.wait(),
        );
        let admin = http::serve(
            self.admin_listener,
            http::admin_router(self.state),
            head_deadline,
            stop.wait(),
        );
        let serving = async { tokio::join!(public, admin) };
        let drain = self.config.drain;
        // On shutdown: not ready at once, serving on for the grace period; then both servers
        // stop accepting and finish what they serve, within the deadline.
        let drain_on_shutdown = async {
            shutdown.await;
            shared_readiness.start_draining();
            tracing::info!(
                grace_seconds = drain.grace.as_secs(),
                deadline_seconds = drain.deadline.as_secs(),
                "draining: /readyz replies 503; serving on for the grace period"
            );
            tokio::time::sleep(drain.grace).await;
            tracing::info!("closing the listeners; finishing the requests in flight");
            stop.trigger();
            tokio::time::sleep(drain.deadline).await;
        };
        tokio::select! {
            _ = serving => {}
            () = drain_on_shutdown => tracing::warn!(
                "requests still in flight at the drain's deadline: their connections are cut"
            ),
        };
        stop.trigger();
        while workers.join_next().await.is_some() {}
        Ok(())
    }
}

/// The state the routers and workers share, with the bank's HTTP API as the bank port.
pub fn build_state(config: &Config, store: SharedStore) -> anyhow::Result<AppState> {
    let bank_http = transport_security::bank_http_client(
        config.bank_timeout,
        config.bank_ca_file.as_deref(),
        config.bank.proxy_url.as_ref(),
    )?;
    let port = Arc::new(BankApiHttp::new(&config.bank_url, bank_http));
    build_state_with_bank(config, store, port)
}

/// The state the routers and workers share, with `port` as the bank (the flows' unit tests pass
/// an in-memory one).
pub fn build_state_with_bank(
    config: &Config,
    store: SharedStore,
    port: Arc<dyn BankPort>,
) -> anyhow::Result<AppState> {
    // The policy's quiet hours need a zone the time-zone database knows: resolved once, before
    // anything starts, or refused naming the field.
    let status_check_zone =
        reconcile::status_check_zone(&config.policy.status_checks).map_err(anyhow::Error::msg)?;
    let metrics = Arc::new(metrics_for(config));
    let bounds = BankBounds {
        money_calls: config.limits.max_bank_calls,
        look_ups: config.limits.max_bank_lookups,
        look_up_wait: config.bank_timeout,
    };
    let bank = Bank::new(port, bounds, config.bank.breaker, Arc::clone(&metrics));
    let (trail, _written_in_background) = Appender::start(store.clone());
    let (customer_signing, operator_signing) = signing(&config.identity)?;
    Ok(AppState::new(Parts {
        trail,
        store,
        replay_cache: ReplayCache::new(config.limits.replay_cache),
        bank,
        policy: Arc::new(config.policy.clone()),
        tokens: Arc::new(CustomerTokens::new(
            customer_signing,
            config.identity.token_rules.clone(),
        )),
        operator_tokens: Arc::new(OperatorTokens::new(
            operator_signing,
            config.identity.operator_rules.clone(),
        )),
        edge_proofs: EdgeProofs::new(
            &config.identity.edge_proof_secrets,
            config.identity.edge_proof_versions,
        )
        .map(Arc::new),
        trail_kept_after_key: config.trail_kept_after_key,
        bank_callback_secrets: Arc::new(config.bank.callback_secrets.clone()),
        status_check_zone,
        ledger_checks: Arc::new(LedgerCheckBounds::new(config.limits.max_bank_lookups)),
        metrics,
        body_limits: BodyLimits::default(),
        limits: config.limits,
        cors_allowed_origins: config.cors_allowed_origins.clone(),
        readiness: Arc::new(Readiness::new(config.replication)),
        requests_in_flight: Arc::new(Semaphore::new(config.limits.max_concurrent_requests)),
        waiting_places: Arc::new(Semaphore::new(config.limits.max_waiting_requests)),
    }))
}

/// The metrics, with what the configuration tells them.
fn metrics_for(config: &Config) -> Metrics {
    let metrics = Metrics::new();
    let required = config.replication != durability::Replication::None;
    metrics
        .database_replication_required
        .set(i64::from(required));
    metrics
}

/// How customers' and operators' tokens are signed; one cache of a key set both use.
fn signing(identity: &Identity) -> anyhow::Result<(Signing, Option<Signing>)> {
    let http = reqwest::Client::builder()
        .build()
        .context("building the client that fetches the identity provider's keys")?;
    let keys_of = |source: &KeySource| {
        Arc::new(ProviderKeys::new(
            source.clone(),
            identity.key_cache,
            http.clone(),
        ))
    };
    let customer_keys = match &identity.customer_keys {
        TokenKeys::Provider(source) => Some((source, keys_of(source))),
        TokenKeys::Secret(_) => None,
    };
    let signing_of = |keys: &TokenKeys| match keys {
        TokenKeys::Secret(secret) => Signing::Secret(secret.expose_secret().as_bytes().to_vec()),
        TokenKeys::Provider(source) => Signing::Provider(match &customer_keys {
            Some((shared, keys)) if *shared == source => Arc::clone(keys),
            _ => keys_of(source),
        }),
    };
    Ok((
        signing_of(&identity.customer_keys),
        identity.operator_keys.as_ref().map(signing_of),
    ))
}

async fn bind(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    TcpListener::bind(addr)
        .await
        .with_context(|| format!("binding {addr}"))
}
