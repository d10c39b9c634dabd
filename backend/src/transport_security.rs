//! Transport security to the bank and the database: TLS with rustls, and the start-up rule that
//! a production backend never talks in plaintext to a bank or database on another machine.
//!
//! - **The bank**: `BANK_URL=https://…`. The server's certificate is always verified, against
//!   the Mozilla roots compiled into the binary, or, when `BANK_CA_FILE` names a PEM file,
//!   against that file's certificates only (a partner bank's private CA: trusting it alone
//!   means no public CA can stand in for the bank).
//! - **PostgreSQL**: the URL's own parameters, as libpq reads them:
//!   `?sslmode=verify-full&sslrootcert=/path/ca.pem` (or `PGSSLMODE`, `PGSSLROOTCERT`).
//!
//! In production (`APP_ENV=production`, the default) start-up refuses, naming the setting, a
//! bank URL that is not `https` and a database connection whose `sslmode` does not verify the
//! server (`disable`, `allow`, `prefer`, and `require`, which encrypts but accepts whoever
//! replies), unless the peer is this machine (a loopback address, `localhost` or a Unix socket)
//! or `ALLOW_PLAINTEXT_TRANSPORT=true` says a layer below (a service mesh's mutual TLS, an
//! IPsec tunnel) protects the link. The embedded SQLite store is a local file: no rule.

use std::net::IpAddr;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use anyhow::{Context, bail};
use sqlx::postgres::{PgConnectOptions, PgSslMode};

/// The setting naming a PEM file of the CA certificates the bank's certificate must chain to.
pub const BANK_CA_FILE_SETTING: &str = "BANK_CA_FILE";

/// The setting that lets production talk plaintext to a remote bank or database.
pub const ALLOW_PLAINTEXT_SETTING: &str = "ALLOW_PLAINTEXT_TRANSPORT";

/// The HTTP client for the bank: every call gives up after `timeout`; with `ca_file`, the
/// bank's certificate must chain to one of that file's certificates and to nothing else.
/// Redirects are never followed (a 307 would send a debit's body to another host: the reply
/// is read as it is, a call that may be in flight), and calls go through `proxy` when it is
/// set and direct otherwise, whatever `HTTP_PROXY`/`HTTPS_PROXY` say.
pub fn bank_http_client(
    timeout: Duration,
    ca_file: Option<&Path>,
    proxy: Option<&reqwest::Url>,
) -> anyhow::Result<reqwest::Client> {
    let mut builder = reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout)
        .redirect(reqwest::redirect::Policy::none());
    builder = match proxy {
        Some(proxy) => builder.proxy(
            reqwest::Proxy::all(proxy.clone()).context("BANK_PROXY_URL is not a usable proxy")?,
        ),
        None => builder.no_proxy(),
    };
    if let Some(ca_file) = ca_file {
        let pem = std::fs::read(ca_file)
            .with_context(|| format!("reading {BANK_CA_FILE_SETTING} ({})", ca_file.display()))?;
        let certificates = reqwest::Certificate::from_pem_bundle(&pem).with_context(|| {
            format!("{BANK_CA_FILE_SETTING} ({}) is not PEM", ca_file.display())
        })?;
        if certificates.is_empty() {
            bail!(
                "{BANK_CA_FILE_SETTING} ({}) holds no certificate",
                ca_file.display()
            );
        }
        builder = builder.tls_built_in_root_certs(false);
        for certificate in certificates {
            builder = builder.add_root_certificate(certificate);
        }
    }
    builder.build().context("building the bank's HTTP client")
}

/// Refuses, naming the setting, a bank or database link that production must not use: see
/// the module documentation. `database_url` may be `sqlite://…` (never refused).
pub fn refuse_plaintext(bank_url: &str, database_url: &str) -> anyhow::Result<()> {
    let bank = reqwest::Url::parse(bank_url).context("BANK_URL is not a URL")?;
    let bank_is_local = bank.host_str().is_some_and(is_local_name);
    if bank.scheme() != "https" && !bank_is_local {
        bail!(
            "BANK_URL ({}) is plaintext to another machine: use https (and {BANK_CA_FILE_SETTING} \
             for a private CA), or set {ALLOW_PLAINTEXT_SETTING}=true if a layer below encrypts \
             the link",
            bank.origin().ascii_serialization()
        );
    }

    if database_url.starts_with("sqlite://") {
        return Ok(());
    }
    let database = PgConnectOptions::from_str(database_url).context("DATABASE_URL is invalid")?;
    let database_is_local = database.get_socket().is_some() || is_local_name(database.get_host());
    let verifies_the_server = matches!(
        database.get_ssl_mode(),
        PgSslMode::VerifyCa | PgSslMode::VerifyFull
    );
    if !verifies_the_server && !database_is_local {
        bail!(
            "DATABASE_URL (host {}) does not verify the database server (sslmode {:?}): add \
             sslmode=verify-full&sslrootcert=/path/to/ca.pem, or set \
             {ALLOW_PLAINTEXT_SETTING}=true if a layer below encrypts the link",
            database.get_host(),
            database.get_ssl_mode()
        );
    }
    Ok(())
}

/// Refuses a plain `http://` URL to another machine for `setting` (the identity provider's key
/// set, say: keys fetched in the clear could be swapped for an attacker's).
pub fn refuse_plaintext_url(setting: &str, url: &str) -> anyhow::Result<()> {
    let parsed = reqwest::Url::parse(url).with_context(|| format!("{setting} is not a URL"))?;
    if parsed.scheme() != "https" && !parsed.host_str().is_some_and(is_local_name) {
        bail!(
            "{setting} ({}) is plaintext to another machine: use https, or set \
             {ALLOW_PLAINTEXT_SETTING}=true if a layer below encrypts the link",
            parsed.origin().ascii_serialization()
        );
    }
    Ok(())
}

/// `localhost`, a loopback address, or a Unix socket directory (PostgreSQL's `host=/path`).
fn is_local_name(host: &str) -> bool {
    let unbracketed = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host.starts_with('/')
        || IpAddr::from_str(unbracketed).is_ok_and(|address| address.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCAL_DATABASE: &str = "postgres://postgres@127.0.0.1:5432/payments";
    const LOCAL_BANK: &str = "http://127.0.0.1:8081";

    #[test]
    fn plaintext_to_a_remote_bank_is_refused_naming_the_setting() {
        for url in [
            "http://bank.example:8081",
            "http://10.0.0.7",
            "http://[2001:db8::1]",
        ] {
            let error = refuse_plaintext(url, LOCAL_DATABASE).expect_err(url);
            assert!(error.to_string().contains("BANK_URL"), "{url}: {error}");
            assert!(
                error.to_string().contains(ALLOW_PLAINTEXT_SETTING),
                "{url}: {error}"
            );
        }
    }

    #[test]
    fn https_or_a_local_bank_is_accepted() {
        for url in [
            "https://bank.example",
            "https://10.0.0.7:8443/v1",
            "http://127.0.0.1:8081",
            "http://127.8.9.10:8081",
            "http://localhost:8081",
            "http://[::1]:8081",
        ] {
            refuse_plaintext(url, LOCAL_DATABASE).unwrap_or_else(|error| panic!("{url}: {error}"));
        }
    }

    #[test]
    fn a_remote_database_must_verify_its_server() {
        for url in [
            "postgres://app@db.example/payments",
            "postgres://app@db.example/payments?sslmode=disable",
            "postgres://app@db.example/payments?sslmode=prefer",
            "postgres://app@db.example/payments?sslmode=require",
            "postgres://app@10.1.2.3/payments?sslmode=allow",
        ] {
            let error = refuse_plaintext(LOCAL_BANK, url).expect_err(url);
            assert!(error.to_string().contains("DATABASE_URL"), "{url}: {error}");
            assert!(
                !error.to_string().contains("app@"),
                "{url}: the refusal must not repeat the URL's credentials: {error}"
            );
        }
    }

    #[test]
    fn a_verifying_or_local_database_is_accepted() {
        for url in [
            "postgres://app@db.example/payments?sslmode=verify-full&sslrootcert=/ca.pem",
            "postgres://app@db.example/payments?sslmode=verify-ca",
            "postgres://postgres@127.0.0.1:5432/payments",
            "postgres://postgres@localhost/payments",
            "postgres://postgres@[::1]:5432/payments",
            "postgres:///payments?host=/var/run/postgresql",
            "sqlite://data/payments.sqlite",
        ] {
            refuse_plaintext(LOCAL_BANK, url).unwrap_or_else(|error| panic!("{url}: {error}"));
        }
    }

    #[test]
    fn a_ca_file_that_is_missing_or_not_pem_is_refused_naming_the_setting() {
        let missing = bank_http_client(
            Duration::from_secs(1),
            Some(Path::new("/nonexistent.pem")),
            None,
        )
        .expect_err("missing file");
        assert!(
            format!("{missing:#}").contains(BANK_CA_FILE_SETTING),
            "{missing:#}"
        );

        let directory = tempfile::tempdir().expect("temporary directory");
        let not_pem = directory.path().join("ca.pem");
        std::fs::write(&not_pem, "not a certificate").expect("write");
        let refused =
            bank_http_client(Duration::from_secs(1), Some(&not_pem), None).expect_err("not PEM");
        assert!(
            format!("{refused:#}").contains(BANK_CA_FILE_SETTING),
            "{refused:#}"
        );
    }
}
