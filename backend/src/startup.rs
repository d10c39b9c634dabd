//! [`Application`]: builds the state from a [`Config`], binds the listener (port 0 picks a free
//! one, as tests do), and runs the server with its background workers until shutdown.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use shared::auth::{TokenRules, TokenVerifier};
use shared::fingerprint::BodyLimits;
use tokio::net::TcpListener;

use crate::bank_client::BankClient;
use crate::config::Config;
use crate::metrics::Metrics;
use crate::shutdown::Shutdown;
use crate::state::AppState;
use crate::store::{self, SharedStore};
use crate::{http, janitor, reconcile};

/// The backend, built and bound, not yet serving.
pub struct Application {
    listener: TcpListener,
    state: AppState,
    config: Config,
}

impl Application {
    /// Connects to the database, applies migrations, and binds the listen address; bearer
    /// tokens are held to the default [`TokenRules`] (no issuer or audience required).
    pub async fn build(config: Config) -> anyhow::Result<Application> {
        Application::build_with_token_rules(config, TokenRules::default()).await
    }

    /// As [`Application::build`], with the deployment's token rules
    /// (`Settings::token_rules`: leeway, required issuer and audience).
    pub async fn build_with_token_rules(
        config: Config,
        token_rules: TokenRules,
    ) -> anyhow::Result<Application> {
        let store =
            store::connect(&config.database_url, 20, config.database_acquire_timeout).await?;
        store.migrate().await.context("applying migrations")?;
        let state = state_with_token_rules(&config, store, token_rules)?;
        let listener = TcpListener::bind(config.listen_addr)
            .await
            .with_context(|| format!("binding {}", config.listen_addr))?;
        Ok(Application {
            listener,
            state,
            config,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// The shared state (tests read the store and metrics through it).
    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Serves until `shutdown` resolves: stops accepting, finishes in-flight requests, stops the
    /// workers after their current step.
    pub async fn run_until_stopped(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> anyhow::Result<()> {
        let stop = Shutdown::default();
        let mut workers = tokio::task::JoinSet::new();
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
        let server =
            axum::serve(self.listener, http::router(self.state)).with_graceful_shutdown(shutdown);
        let served = server.await.context("serving HTTP");
        stop.trigger();
        while workers.join_next().await.is_some() {}
        served
    }
}

/// The state the router and workers share, with the default [`TokenRules`] (the workers
/// never read a token).
pub fn build_state(config: &Config, store: SharedStore) -> anyhow::Result<AppState> {
    state_with_token_rules(config, store, TokenRules::default())
}

fn state_with_token_rules(
    config: &Config,
    store: SharedStore,
    token_rules: TokenRules,
) -> anyhow::Result<AppState> {
    let bank = BankClient::new(&config.bank_url, config.bank_timeout)
        .context("building the bank client")?;
    Ok(AppState {
        store,
        bank,
        policy: Arc::new(config.policy.clone()),
        tokens: Arc::new(TokenVerifier::new(config.jwt_secret.clone(), token_rules)),
        metrics: Arc::new(Metrics::new()),
        body_limits: BodyLimits::default(),
    })
}
