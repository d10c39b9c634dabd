#!/usr/bin/env bash
# Runs the edge Worker locally under `wrangler dev`, offline, on 127.0.0.1:${EDGE_PORT:-8787},
# in front of the backend at ${BACKEND_URL:-http://127.0.0.1:8080} (scripts/run-local.sh starts
# both). wrangler builds the Worker first ([build] in wrangler.toml: scripts/build-edge.sh).
#
# Writes .dev.vars (gitignored, mode 600) with AUTH_JWT_SECRET, which must be the backend's:
# $AUTH_JWT_SECRET if set, else the development default (shared/src/auth.rs, only accepted in
# APP_ENV=development), and APP_ENV ($APP_ENV, else development; it overrides wrangler.toml's
# production). Further arguments go to wrangler dev (e.g. --var RATE_LIMIT_USER_BURST:100).
# Durable Object state goes to .wrangler/state.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/setup-tools.sh
umask 077
printf 'AUTH_JWT_SECRET=%s\nAPP_ENV=%s\n' \
  "${AUTH_JWT_SECRET:-development-only-jwt-secret-never-use-in-production}" \
  "${APP_ENV:-development}" > .dev.vars

export WRANGLER_SEND_METRICS=false CLOUDFLARE_CF_FETCH_ENABLED=false
# wrangler needs Node >= 22: run it on the Node binary package-lock.json pins.
exec node_modules/.bin/node node_modules/wrangler/bin/wrangler.js dev \
  --ip 127.0.0.1 --port "${EDGE_PORT:-8787}" --persist-to .wrangler/state \
  --var "BACKEND_URL:${BACKEND_URL:-http://127.0.0.1:8080}" "$@"
