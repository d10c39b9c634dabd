#!/usr/bin/env bash
# Installs the tools the build and the tests need, on a fresh machine or this one: the Wasm
# target and the wasm-bindgen CLI (with its test runner) at exactly the wasm-bindgen version in
# Cargo.lock; for the edge Worker, worker-build and the npm packages package-lock.json pins
# (wrangler with workerd and esbuild, a Node 22 binary for wrangler, binaryen for wasm-opt);
# cargo-deny for the supply-chain check (deny.toml); Debian's Chromium and chromedriver for the
# operator console's browser test; promtool for the alerting rules' tests; etcd, HAProxy and
# Patroni for the replicated PostgreSQL of the failover tests (scripts/ha-cluster.sh); schemathesis
# for the OpenAPI document's test (scripts/schemathesis.sh); podman,
# runc, podman-compose, mmdebstrap and musl for the container checks (deploy/). Every `cargo
# install` is pinned and `--locked`: the tool is built with the dependency versions its authors
# tested, not the newest (unless the registry lacks one of them: `install_pinned`).
# The system packages (apt, PyPI) install in the background while the Rust tools compile: the
# one waits on the network and the disk, the other on the cores (on a fresh 2-core machine
# this saves minutes). Idempotent: a second run only checks. Run by tests/run-all.sh and the
# dev scripts.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# `apt_install_unless_present COMMAND... -- PACKAGE...`: installs the packages (apt-get's
# options may be among them) unless every command is already present; the package lists are
# refreshed only if the install fails.
apt_install_unless_present() {
  local commands=() packages=()
  while [ "$1" != -- ]; do commands+=("$1"); shift; done
  shift
  packages=("$@")
  local command
  for command in "${commands[@]}"; do
    if ! command -v "$command" >/dev/null; then
      echo "setup-tools: installing ${packages[*]} (apt-get)"
      if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}" >/dev/null; then
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${packages[@]}" >/dev/null
      fi
      return
    fi
  done
}

# The system packages, one apt-get at a time (they share dpkg's lock).
install_system_packages() {
  # The operator console's and the pay page's browser tests drive Debian's headless Chromium
  # through chromedriver.
  apt_install_unless_present chromium chromedriver -- chromium chromium-driver
  # promtool (Debian's prometheus package) for the alerting rules' unit tests
  # (deploy/prometheus/); the server it also installs is not started.
  apt_install_unless_present promtool -- --no-install-recommends prometheus
  # The container image's and the compose file's checks (deploy/verify-*.sh): podman with runc
  # (the runtime the container notes measured here), podman-compose, mmdebstrap for the
  # PostgreSQL image's root filesystem, musl-gcc for the static backend's C parts.
  apt_install_unless_present podman runc podman-compose mmdebstrap musl-gcc -- \
    podman runc podman-compose mmdebstrap musl-tools
  # The replicated PostgreSQL of the failover suite and the HA soak (etcd, HAProxy, Patroni in a
  # virtualenv), and HAProxy in front of the soak's replicas: scripts/ha-cluster.sh installs them.
  scripts/ha-cluster.sh install
  # schemathesis in a virtualenv, for the OpenAPI document's test: scripts/schemathesis.sh.
  scripts/schemathesis.sh install
}
system_log=$(mktemp)
tool_logs=$(mktemp -d)
# An interrupted run stops the background installs and builds too.
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$system_log" "$tool_logs"' EXIT
install_system_packages >"$system_log" 2>&1 &
system_packages=$!

# The Rust tools build at the same time, each in the background with its own log: one cargo
# install leaves a core idle in its serial stretches (a large crate alone, the final link), and
# together they keep both busy. `build_tool CRATE VERSION WHY` starts one.
tool_builds=()
build_tool() {
  echo "setup-tools: building $1 $2 from source ($3)"
  install_pinned "$1" "$2" >"$tool_logs/$1.log" 2>&1 &
  tool_builds+=("$1:$!")
}

# Installs crate $1 at exactly version $2: with the tool's own Cargo.lock first; if the registry
# this machine reaches lacks a version that lock names (seen here: a mirror without
# webpki-roots 1.0.11, which wasm-bindgen-cli 0.2.130 locks), resolved afresh within the tool's
# own version requirements instead, and said so. Built to be built quickly, not to run at its
# fastest: cargo-deny's release profile asks for whole-program LTO in one codegen unit, which
# the tests never notice and which cost minutes of a fresh machine's set-up (docs/figures.md);
# these variables override every tool's release profile.
install_pinned() {
  export CARGO_PROFILE_RELEASE_LTO=off CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16
  if ! cargo install --locked "$1" --version "=$2"; then
    echo "setup-tools: $1 $2 cannot be built with its own Cargo.lock from this registry;" \
      "building it with the newest versions its requirements allow" >&2
    cargo install "$1" --version "=$2"
  fi
}

rustup target list --installed | grep -qx wasm32-unknown-unknown \
  || rustup target add wasm32-unknown-unknown

locked_wasm_bindgen=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/[^0-9.]/, ""); print; exit }' Cargo.lock)
if [ -z "$locked_wasm_bindgen" ]; then
  echo "setup-tools: no wasm-bindgen in Cargo.lock; run 'cargo generate-lockfile' first" >&2
  exit 1
fi
installed=$(wasm-bindgen --version 2>/dev/null | awk '{ print $2 }' || true)
if [ "$installed" != "$locked_wasm_bindgen" ]; then
  build_tool wasm-bindgen-cli "$locked_wasm_bindgen" "found '${installed:-none}'"
fi
command -v node >/dev/null || { echo "setup-tools: Node.js is required for the Wasm tests (apt-get install nodejs)" >&2; exit 1; }

# The edge Worker's build (scripts/build-edge.sh) and its end-to-end tests (workerd).
worker_build_version=0.8.7
if [ "$(worker-build --version 2>/dev/null || true)" != "$worker_build_version" ]; then
  build_tool worker-build "$worker_build_version" "the Worker's build"
fi
command -v npm >/dev/null || { echo "setup-tools: npm is required for the edge tools (apt-get install npm)" >&2; exit 1; }
if ! npm ls --depth=0 >/dev/null 2>&1; then
  echo "setup-tools: installing the edge's npm packages (package-lock.json)"
  npm ci --no-audit --no-fund
fi
if ! (cd clients/typescript && npm ls --depth=0 >/dev/null 2>&1); then
  echo "setup-tools: installing the TypeScript client's npm packages (clients/typescript/package-lock.json)"
  (cd clients/typescript && npm ci --no-audit --no-fund)
fi

# The supply-chain check in tests/run-all.sh (licences, bans, sources: deny.toml).
cargo_deny_version=0.20.2
if [ "$(cargo deny --version 2>/dev/null || true)" != "cargo-deny $cargo_deny_version" ]; then
  build_tool cargo-deny "$cargo_deny_version" "the supply-chain check"
fi

rustup target list --installed | grep -qx x86_64-unknown-linux-musl \
  || rustup target add x86_64-unknown-linux-musl

for build in "${tool_builds[@]}"; do
  if ! wait "${build#*:}"; then
    cat "$tool_logs/${build%%:*}.log" >&2
    echo "setup-tools: building ${build%%:*} failed (above)" >&2
    exit 1
  fi
done
if [ ${#tool_builds[@]} -gt 0 ]; then echo "setup-tools: the Rust tools are built"; fi

if ! wait "$system_packages"; then
  cat "$system_log" >&2
  echo "setup-tools: installing the system packages failed (above)" >&2
  exit 1
fi
cat "$system_log"
