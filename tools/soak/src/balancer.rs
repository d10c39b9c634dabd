//! [`Balancer`]: HAProxy in front of the backend replicas, as a deployment puts it: HTTP, each
//! request to a replica whose `GET /readyz` replied 200 at the last health checks (twice a
//! second; two failures take a replica out, one success puts it back), a request whose
//! connection was refused sent to another replica, never a request resent once it reached one.
//!
//! Replicas restart on new ports, so each server slot's address is set at run time through
//! HAProxy's admin socket (`set server … addr`), as service discovery does; the balancer's own
//! address stays put. A replica stopped on purpose (SIGTERM) replies 503 to `/readyz` at once and
//! serves on for its grace period, so the health checks take it out before it stops accepting
//! (the backend's drain); a killed one is found out by the same checks.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::Context;
use test_harness::ServerProcess;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

/// The backend name of the replicas in HAProxy's configuration.
const BACKEND: &str = "replicas";

/// HAProxy, running; stopped with its process group when dropped.
pub struct Balancer {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    socket: PathBuf,
    _process: ServerProcess,
}

impl Balancer {
    /// Starts HAProxy on `127.0.0.1:port` in front of `slots` replicas (none set yet), with its
    /// files in `scratch`.
    pub async fn start(scratch: &Path, port: u16, slots: usize) -> anyhow::Result<Balancer> {
        let config = scratch.join("haproxy.cfg");
        let socket = scratch.join("haproxy.sock");
        std::fs::write(&config, configuration(&socket, port, slots))?;
        let mut command = Command::new("haproxy");
        command.arg("-db").arg("-f").arg(&config);
        let process = ServerProcess::spawn("haproxy", command);
        let balancer = Balancer {
            url: format!("http://127.0.0.1:{port}"),
            socket,
            _process: process,
        };
        for _ in 0..100 {
            if balancer.command("show info").await.is_ok() {
                return Ok(balancer);
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        anyhow::bail!("HAProxy did not open its admin socket (is port {port} free?)")
    }

    /// Puts replica `slot` at `address` and lets the health checks bring it in.
    pub async fn set(&self, slot: usize, address: SocketAddr) -> anyhow::Result<()> {
        self.command(&format!(
            "set server {BACKEND}/r{slot} addr {} port {}",
            address.ip(),
            address.port()
        ))
        .await?;
        self.command(&format!("set server {BACKEND}/r{slot} state ready"))
            .await
            .map(drop)
    }

    /// Sends one command to the admin socket; its reply.
    async fn command(&self, command: &str) -> anyhow::Result<String> {
        let mut stream = UnixStream::connect(&self.socket)
            .await
            .with_context(|| format!("HAProxy's admin socket {}", self.socket.display()))?;
        stream.write_all(format!("{command}\n").as_bytes()).await?;
        let mut reply = String::new();
        stream.read_to_string(&mut reply).await?;
        let reply = reply.trim();
        anyhow::ensure!(
            !reply.contains("No such") && !reply.contains("Unknown command"),
            "HAProxy refused `{command}`: {reply}"
        );
        Ok(reply.to_owned())
    }
}

/// The configuration: `slots` servers, parked on a port nothing listens on until set.
fn configuration(socket: &Path, port: u16, slots: usize) -> String {
    let mut config = format!(
        "global
    maxconn 4000
    stats socket {socket} mode 600 level admin

defaults
    mode http
    retries 3
    option redispatch
    timeout connect 1s
    timeout client 60s
    timeout server 60s
    timeout http-request 10s
    timeout check 1s

listen {BACKEND}
    bind 127.0.0.1:{port}
    balance roundrobin
    option httpchk
    http-check send meth GET uri /readyz
    http-check expect status 200
    default-server inter 500ms fall 2 rise 1
",
        socket = socket.display()
    );
    for slot in 0..slots {
        config.push_str(&format!("    server r{slot} 127.0.0.1:9 check disabled\n"));
    }
    config
}
