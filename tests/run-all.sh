#!/usr/bin/env bash
# Runs every test of the project, the one command the README gives and .ci/run calls.
# Installs what is missing first and starts PostgreSQL if it is down, then: format, supply-chain
# (cargo deny: licences, bans, sources) and lint checks, the Prometheus rules' unit tests
# (promtool), the Kubernetes manifests against the schemas, the TypeScript client's tests (npm),
# the native test suites (the backend's against a real PostgreSQL and bank simulator, its
# failover suite on a Patroni cluster; the edge's again with no reply kept at the edge), a
# point-in-time restore (scripts/backup-restore.sh), a DR copy promoted
# (scripts/dr-promotion.sh), the public OpenAPI document against a running backend
# (schemathesis), a page on another origin paying through CORS in headless Chromium
# (scripts/cors-browser-test.sh), the chaos soaks (on PostgreSQL, SQLite and a Patroni cluster,
# on loopback and partitioned in network namespaces, and the two negative controls the audit must
# fail), the previous release's backend beside this one (scripts/two-releases.sh), the
# production container image run with podman (deploy/verify-container.sh),
# deploy/compose.yaml run with podman-compose (deploy/verify-compose.sh), and the shared and edge
# crates' tests again under wasm32-unknown-unknown (in Node, via wasm-bindgen-test).
# Exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

step() { printf '\n==> %s (at %d s)\n' "$*" "$SECONDS"; }

step "tools"
scripts/setup-tools.sh

step "PostgreSQL"
scripts/start-postgres.sh
# Each backend test makes its own database test_<uuid>; drop those left by earlier runs.
psql -h 127.0.0.1 -U postgres -d postgres -Atc \
  "SELECT 'DROP DATABASE \"' || datname || '\";' FROM pg_database WHERE datname LIKE 'test\\_%'" \
  | psql -q -h 127.0.0.1 -U postgres -d postgres >/dev/null

# Three checks after the soaks need things made beforehand, in the background, and waited for
# there: the compose check's PostgreSQL root filesystem, mostly downloads and unpacking, made
# from here while the cores compile; the static binaries of the container check
# (deploy/build-static.sh) and the previous release's backend of the two-releases test
# (scripts/two-releases.sh --build-only), each in a target directory of its own, built from the
# start of the soaks, whose fixed durations leave CPU time idle, at the lowest priority (nice 19)
# so the soaks' processes come first. The shared and edge crates' tests under wasm32 run there
# too, in a target directory of their own so that no soak build waits on its lock (85 s and
# 153 s of CPU alone, 2026-12-07). (Started at the beginning instead, the static build slowed
# the lint, Worker and native test steps by about 275 s when it was measured.)
background_log=$(mktemp -d)
deploy/local-images/postgres-rootfs.sh >"$background_log/rootfs.log" 2>&1 &
rootfs_maker=$!
static_build=
previous_release_build=
wasm_tests=
trap 'kill $static_build $previous_release_build $wasm_tests "$rootfs_maker" 2>/dev/null || true' EXIT
# Waits for background job $1 (pid $2); on its failure prints its log and fails the run.
wait_for_background() {
  wait "$2" || { cat "$background_log/$1.log" >&2; echo "the background job $1 failed (above)" >&2; exit 1; }
}

step "format"
cargo fmt --all -- --check

step "supply chain: licences, bans, sources (cargo deny; advisories are not checked here)"
# deny.toml says what is allowed. The advisory database cannot be fetched on these machines;
# where it can: cargo deny --locked check advisories.
cargo deny --locked check --hide-inclusion-graph licenses bans sources

step "lint (native and wasm32)"
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo clippy -p shared -p edge --all-targets --target wasm32-unknown-unknown --locked -- -D warnings

step "Prometheus rules: syntax and their unit tests (promtool)"
promtool check rules deploy/prometheus/rules.yml
promtool test rules deploy/prometheus/rules.test.yml

step "Kubernetes manifests: rendered and validated against the schemas (deploy/verify-kubernetes.sh)"
deploy/verify-kubernetes.sh

step "edge Worker build (worker-build with the local tools)"
scripts/build-edge.sh

step "TypeScript client (clients/typescript): type check, unit tests and the client rules' vectors; the page and the stack tests built for the native tests"
(cd clients/typescript && npm run typecheck && npm test && npm run build:web && npm run build:stack)

step "native tests"
# Every binary first: tests run the tools' binaries (phone, incident-replay…) as processes, and
# `cargo test` builds a package's binaries only for that package's own tests.
cargo build --workspace --bins --locked
# Four tests at a time, not one per core: most wait on servers, timeouts and the bank, not the
# CPU. On 2 cores the contract suite takes 172 s against 299 s (8 at a time made two
# timing-bound tests fail).
RUST_TEST_THREADS=4 cargo test --workspace --locked

step "the edge's suites again, its Durable Objects keeping no reply (EDGE_TESTS_KEEP_REPLIES=false, the residency mode)"
# Named from the workspace, not `-p edge`: the same test binaries as above, where `-p edge`
# would unify features differently and rebuild half the dependencies (2 minutes).
edge_suites=()
for suite in edge/tests/*.rs; do edge_suites+=(--test "$(basename "$suite" .rs)"); done
EDGE_TESTS_KEEP_REPLIES=false RUST_TEST_THREADS=4 cargo test --workspace --locked "${edge_suites[@]}"

step "a restore to a point in time: what it keeps, what it loses, what the bank's file says (scripts/backup-restore.sh)"
scripts/backup-restore.sh

step "a region lost: the asynchronous DR copy promoted, lost claims rebuilt without a second debit (scripts/dr-promotion.sh)"
scripts/dr-promotion.sh

step "the public OpenAPI document against a running backend: schemathesis (scripts/schemathesis.sh)"
scripts/schemathesis.sh

step "CORS: a page on a listed origin pays in headless Chromium, one on another is blocked (scripts/cors-browser-test.sh)"
scripts/cors-browser-test.sh

step "chaos soak: 60 s through the edge and three replicas under faults, then the audit"
nice -n 19 deploy/build-static.sh >"$background_log/static.log" 2>&1 &
static_build=$!
nice -n 19 scripts/two-releases.sh --build-only >"$background_log/previous-release.log" 2>&1 &
previous_release_build=$!
CARGO_TARGET_DIR=target/wasm-tests nice -n 19 \
  cargo test -p shared -p edge --lib --target wasm32-unknown-unknown --locked \
  >"$background_log/wasm.log" 2>&1 &
wasm_tests=$!
scripts/soak.sh --duration-seconds 60 --seed 1
scripts/soak.sh --duration-seconds 30 --database sqlite --seed 1

step "chaos soak: the audit fails a client that charges twice (a new key per retry)"
broken_log=$(mktemp)
if scripts/soak.sh --duration-seconds 30 --seed 4 --phones 10 --client key-per-retry >"$broken_log" 2>&1; then
  cat "$broken_log"
  echo "the audit passed a client that makes a new key per retry" >&2
  exit 1
fi
grep -q "one user action debited more than once" "$broken_log" \
  || { cat "$broken_log"; echo "the audit did not name the double charge" >&2; exit 1; }
grep -E "^(double debits|audit:)" "$broken_log"
rm -f "$broken_log"

step "chaos soak on a Patroni cluster: its leader killed twice, a switchover, standbys lost, the leader paused, etcd restarted"
scripts/soak.sh --database ha --duration-seconds 150 --seed 1

# The asynchronous negative control runs in network namespaces below (a cut-off leader that
# acknowledges alone); on loopback, `--ha-replication asynchronous --cluster-faults
# lose-the-tail` shows the same by hand (scripts/soak.sh's header).
# Each partition is held 10-35 s, healed and waited out until the cluster is whole (15-65 s in
# all), one after another, so the soak outlasts its 90 s: 4.5 min with the cluster's start and
# teardown. The duration sets how many other faults strike between them.
step "chaos soak in network namespaces: the leader cut off, a split brain, the synchronous standby cut, a lossy and a slow database link, the bank's link cut mid-call"
scripts/soak.sh --database ha --network namespaces --duration-seconds 90 --seed 1

step "chaos soak: the audit fails a cut-off leader that replicates asynchronously (the payments it acknowledged alone lost)"
broken_log=$(mktemp)
if scripts/soak.sh --database ha --network namespaces --ha-replication asynchronous \
  --cluster-faults isolate-leader --other-faults false --duration-seconds 40 --settle-seconds 20 \
  --seed 1 >"$broken_log" 2>&1; then
  cat "$broken_log"
  echo "the audit passed a cut-off leader that acknowledged commits no standby had" >&2
  exit 1
fi
grep -q "an acknowledged movement missing from the books" "$broken_log" \
  || { cat "$broken_log"; echo "the audit did not name the lost payments" >&2; exit 1; }
grep -E "^(lost or orphan movements|audit:)" "$broken_log"
rm -f "$broken_log"

step "two releases side by side: the previous release's backend beside this one on one database (scripts/two-releases.sh)"
wait_for_background previous-release "$previous_release_build"
scripts/two-releases.sh

step "container image, run with podman (deploy/verify-container.sh)"
wait_for_background static "$static_build"
deploy/verify-container.sh

step "the compose file, run with podman-compose: a payment and its replay (deploy/verify-compose.sh)"
wait_for_background rootfs "$rootfs_maker"
deploy/verify-compose.sh

step "shared and edge crates under wasm32-unknown-unknown (Node), run behind the soaks"
wait_for_background wasm "$wasm_tests"
grep -E "^test result" "$background_log/wasm.log"

step "all suites passed"
