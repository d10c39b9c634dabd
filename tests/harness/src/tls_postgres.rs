//! [`TlsPostgres`]: a throwaway PostgreSQL cluster that accepts TLS connections only, with a
//! certificate from a test's own CA, for the tests of the backend's TLS to its database.
//!
//! It is made with the machine's own `initdb` and `pg_ctl` (the PostgreSQL that
//! `scripts/start-postgres.sh` installs) in a scratch directory, listens on 127.0.0.1 only, and
//! its `pg_hba.conf` rejects every plaintext TCP connection (`hostnossl … reject`), so a client
//! that reaches it spoke TLS. PostgreSQL cannot report a port it picked, so a free port is
//! chosen and the start retried on another if that one was taken meanwhile. As root (these
//! machines' CI), the cluster runs as the `postgres` user, as `initdb` requires. Stopped
//! (`pg_ctl stop -m immediate`) and removed when the value is dropped.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::certificates::ServerIdentity;

/// How many ports a start tries before giving up.
const START_ATTEMPTS: usize = 5;

/// A running TLS-only PostgreSQL cluster.
pub struct TlsPostgres {
    directory: PathBuf,
    binaries: PathBuf,
    port: u16,
}

impl TlsPostgres {
    /// Makes and starts a cluster serving `identity`'s certificate. Blocks for a few seconds.
    pub fn start(identity: &ServerIdentity) -> TlsPostgres {
        let binaries = postgres_binaries();
        let directory = std::env::temp_dir().join(format!("tls-postgres-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&directory).expect("the cluster's scratch directory");
        let data = directory.join("data");
        std::fs::copy(&identity.certificate_file, directory.join("server.crt"))
            .expect("copy the certificate");
        std::fs::copy(&identity.key_file, directory.join("server.key")).expect("copy the key");
        let mut cluster = TlsPostgres {
            directory,
            binaries,
            port: 0,
        };
        cluster.hand_over_to_the_server_user();
        cluster.run_checked(
            "initdb",
            &[
                "-D",
                path_str(&data),
                "-U",
                "postgres",
                "--auth=trust",
                "--no-sync",
                "-E",
                "UTF8",
            ],
        );
        cluster.configure_tls_only(&data);
        for _ in 0..START_ATTEMPTS {
            cluster.port = free_port();
            let log = cluster.directory.join("server.log");
            let started = cluster.run(
                "pg_ctl",
                &[
                    "start",
                    "-w",
                    "-t",
                    "30",
                    "-D",
                    path_str(&data),
                    "-l",
                    path_str(&log),
                    "-o",
                    &format!("-p {}", cluster.port),
                ],
            );
            if started.status.success() {
                return cluster;
            }
        }
        panic!(
            "the TLS PostgreSQL cluster did not start on any of {START_ATTEMPTS} ports; its \
             log:\n{}",
            std::fs::read_to_string(cluster.directory.join("server.log")).unwrap_or_default()
        );
    }

    /// A URL for the `postgres` database as `postgres`, on `localhost` (the certificate's
    /// name), with the query `parameters` appended (e.g. `sslmode=verify-full&sslrootcert=…`).
    pub fn url(&self, parameters: &str) -> String {
        format!(
            "postgres://postgres@localhost:{}/postgres?{parameters}",
            self.port
        )
    }

    /// The server's TLS files belong to the user it runs as, the key readable by it alone (the
    /// server refuses a key others can read).
    fn hand_over_to_the_server_user(&self) {
        let key = self.directory.join("server.key");
        set_mode(&key, 0o600);
        if running_as_root() {
            let owned = Command::new("chown")
                .args(["-R", "postgres:postgres", path_str(&self.directory)])
                .status()
                .expect("chown runs");
            assert!(owned.success(), "chown of the cluster directory failed");
        }
    }

    /// TLS on with the copied certificate; TCP on 127.0.0.1 for TLS connections only.
    fn configure_tls_only(&self, data: &Path) {
        let settings = format!(
            "listen_addresses = '127.0.0.1'\n\
             unix_socket_directories = '{directory}'\n\
             ssl = on\n\
             ssl_cert_file = '{directory}/server.crt'\n\
             ssl_key_file = '{directory}/server.key'\n\
             fsync = off\n",
            directory = self.directory.display()
        );
        append(&data.join("postgresql.conf"), &settings);
        std::fs::write(
            data.join("pg_hba.conf"),
            "local all all trust\n\
             hostssl all all 127.0.0.1/32 trust\n\
             hostnossl all all 127.0.0.1/32 reject\n",
        )
        .expect("write pg_hba.conf");
    }

    /// Runs one of the PostgreSQL binaries, as `postgres` when this process is root.
    fn run(&self, binary: &str, arguments: &[&str]) -> Output {
        let program = self.binaries.join(binary);
        let mut command = if running_as_root() {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(program);
            command
        } else {
            Command::new(program)
        };
        command
            .args(arguments)
            .current_dir(&self.directory)
            .output()
            .unwrap_or_else(|error| panic!("{binary} does not run: {error}"))
    }

    fn run_checked(&self, binary: &str, arguments: &[&str]) {
        let output = self.run(binary, arguments);
        assert!(
            output.status.success(),
            "{binary} failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

impl Drop for TlsPostgres {
    fn drop(&mut self) {
        let data = self.directory.join("data");
        self.run(
            "pg_ctl",
            &["stop", "-m", "immediate", "-D", path_str(&data)],
        );
        let _ = std::fs::remove_dir_all(&self.directory);
    }
}

/// The newest installed PostgreSQL's binary directory (`/usr/lib/postgresql/N/bin`).
fn postgres_binaries() -> PathBuf {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse().ok()?;
            let binaries = entry.path().join("bin");
            binaries
                .join("initdb")
                .is_file()
                .then_some((version, binaries))
        })
        .collect();
    versions.sort();
    versions
        .pop()
        .map(|(_, binaries)| binaries)
        .expect("no PostgreSQL under /usr/lib/postgresql: run scripts/start-postgres.sh")
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|output| output.stdout.trim_ascii() == b"0")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|address| address.port())
        .expect("a free port")
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
}

fn append(path: &Path, text: &str) {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .expect("open for appending");
    file.write_all(text.as_bytes()).expect("append");
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("scratch paths are UTF-8")
}
