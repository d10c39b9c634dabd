//! The backend's command line: `serve` (the default), `migrate`, one-shot runs of the
//! reconciler and the janitor for operators, and `dev-token` / `dev-operator-token` to sign a
//! development token for a customer or for the operator console.

use anyhow::Context;
use backend::config::Settings;
use backend::startup::{Application, build_state};
use backend::store::{self, SharedStore};
use backend::{janitor, reconcile, shutdown, telemetry};
use clap::{Parser, Subcommand};
use secret_settings::ExposeSecret;
use shared::UserId;
use shared::auth::sign_claims;

/// mimalloc instead of the C library's allocator: the server allocates on every request (HTTP
/// buffers, rows, JSON), and glibc's allocator took about a tenth of its CPU per payment
/// (docs/figures.md, "Where a payment's CPU goes"); musl's, in the static container build, is
/// slower still.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(about = "The payments backend: safe retries without double charges")]
struct Cli {
    #[command(flatten)]
    settings: Settings,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the API with the reconciler and janitor (the default).
    Serve,
    /// Apply the database migrations and exit.
    Migrate,
    /// Resolve every key that is due for reconciliation now, then exit.
    ReconcileOnce,
    /// Delete every expired key, in batches, then exit.
    ExpireOnce,
    /// Import the bank's end-of-day settlement file (CSV, SPEC §7): resolve every undecided
    /// movement it names, report lines that disagree with our records, print a summary. Exits
    /// non-zero on a malformed file (naming the line), with nothing applied.
    Settle {
        /// The settlement file.
        file: std::path::PathBuf,
    },
    /// Exit 0 if the server at LISTEN_ADDR replies to `GET /healthz` (the container's health
    /// check).
    Healthcheck,
    /// Print a bearer token for a user, signed with the configured secret and carrying the
    /// configured issuer and audience (development).
    DevToken {
        /// The user: the token's subject (1-255 printable ASCII characters, SPEC §3).
        #[arg(long, default_value = "42")]
        user: String,
        /// How long the token is valid, in hours.
        #[arg(long, default_value_t = 24)]
        hours: i64,
    },
    /// Print an operator token for the console (the operator role in the role claim), signed
    /// with the configured operator secret (development; production's come from the identity
    /// provider).
    DevOperatorToken {
        /// The operator's name, recorded with their actions in the audit trail.
        #[arg(long, default_value = "dev-operator")]
        name: String,
        /// How long the token is valid, in minutes (at most OPERATOR_TOKEN_MAX_LIFETIME_SECONDS).
        #[arg(long, default_value_t = 60)]
        minutes: i64,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // Held to the end of `main`: dropping it sends the spans still queued.
    let _tracing = telemetry::init(cli.settings.log_format)?;
    let command = cli.command.unwrap_or(Command::Serve);
    if let Command::Healthcheck = command {
        return healthcheck(cli.settings.listen_addr).await;
    }
    let config = cli.settings.into_config()?;
    match command {
        Command::Healthcheck => Ok(()),
        Command::Serve => {
            let app = Application::build(config).await?;
            tracing::info!(addr = %app.local_addr(), "backend listening");
            // Fixed lines on standard output: where it listens (port 0 picks a port), for
            // whoever started it (tests, scripts) to read instead of guessing; the public
            // address last, once both listeners are bound.
            println!("backend admin listening on http://{}", app.admin_addr());
            println!("backend listening on http://{}", app.local_addr());
            app.run_until_stopped(shutdown::terminate_signal()).await
        }
        Command::Migrate => {
            connect(&config).await?;
            tracing::info!("migrations applied");
            Ok(())
        }
        Command::ReconcileOnce => {
            let state = build_state(&config, connect(&config).await?)?;
            let mut handled = 0;
            while reconcile::try_reconcile_once(&state).await? != reconcile::Step::NothingDue {
                handled += 1;
            }
            tracing::info!(handled, "reconciliation pass done");
            Ok(())
        }
        Command::Settle { file } => {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("reading the settlement file {}", file.display()))?;
            let state = build_state(&config, connect(&config).await?)?;
            let cause = backend::domain::Cause::background();
            let summary = backend::settlement::import(&state, &text, &cause)
                .await
                .with_context(|| format!("in {}", file.display()))?;
            print!("{summary}");
            Ok(())
        }
        Command::DevToken { user, hours } => {
            let user = UserId::from_subject(&user).context("--user")?;
            let exp = time::OffsetDateTime::now_utc().unix_timestamp() + hours * 3600;
            let claims = config.identity.token_rules.claims_for(user, exp);
            let secret = config.identity.customer_keys.secret().context(
                "customers' tokens come from the identity provider (AUTH_JWKS_URL); dev-token \
                 signs only with AUTH_JWT_SECRET",
            )?;
            println!(
                "{}",
                sign_claims(&claims, secret.expose_secret().as_bytes())
            );
            Ok(())
        }
        Command::DevOperatorToken { name, minutes } => {
            let now = time::OffsetDateTime::now_utc().unix_timestamp();
            let rules = &config.identity.operator_rules;
            let mut claims =
                serde_json::json!({ "sub": name, "iat": now, "exp": now + minutes * 60 });
            claims[rules.role_claim.as_str()] = serde_json::json!([rules.role]);
            if let Some(issuer) = rules.tokens.issuer() {
                claims["iss"] = issuer.into();
            }
            if let Some(audience) = rules.tokens.audience() {
                claims["aud"] = audience.into();
            }
            let secret = config
                .identity
                .operator_keys
                .as_ref()
                .and_then(|keys| keys.secret())
                .context(
                    "no operator secret is configured (OPERATOR_JWT_SECRET, or development): \
                     operators' tokens come from the identity provider, or the console is closed",
                )?;
            println!(
                "{}",
                sign_claims(&claims, secret.expose_secret().as_bytes())
            );
            Ok(())
        }
        Command::ExpireOnce => {
            let state = build_state(&config, connect(&config).await?)?;
            let deleted = janitor::expire_all(&state, janitor::EXPIRY_BATCH_SIZE).await?;
            tracing::info!(deleted, "expired keys deleted");
            Ok(())
        }
    }
}

/// `GET /healthz` on the local listener (0.0.0.0 is reached through 127.0.0.1).
async fn healthcheck(listen_addr: std::net::SocketAddr) -> anyhow::Result<()> {
    let target = if listen_addr.ip().is_unspecified() {
        std::net::SocketAddr::from(([127, 0, 0, 1], listen_addr.port()))
    } else {
        listen_addr
    };
    let response = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(2))
        .build()?
        .get(format!("http://{target}/healthz"))
        .send()
        .await
        .context("the server does not reply")?;
    anyhow::ensure!(
        response.status().is_success(),
        "healthz replied {}",
        response.status()
    );
    Ok(())
}

async fn connect(config: &backend::config::Config) -> anyhow::Result<SharedStore> {
    let store = store::connect(
        config.database_url.expose_secret(),
        2,
        config.database_acquire_timeout,
    )
    .await?;
    store.migrate().await.context("applying migrations")?;
    Ok(store)
}
