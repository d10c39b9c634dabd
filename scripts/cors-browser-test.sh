#!/usr/bin/env bash
# CORS in a real browser (CORS_ALLOWED_ORIGINS, backend/src/http/cors.rs): a page on another
# origin than the API's pays a bill with fetch() in headless Chromium, sending Authorization,
# Idempotency-Key and traceparent (so Chromium sends a preflight first), then retries with the
# same key; the page reads the status and Idempotency-Expires of the first reply and
# Idempotent-Replayed of the retry, so the test fails unless the preflight is allowed and those
# headers are exposed. The same page served from an origin not on the list must be blocked
# (fetch rejects) and reach nothing: one debit at the bank's ledger in all.
#
#   scripts/cors-browser-test.sh
#
# Starts PostgreSQL if it is down (scripts/start-postgres.sh) and a database of its own, the bank
# simulator, the backend in development mode (no edge: the page calls the backend directly)
# allowing one page origin, two static servers for the page on other ports of 127.0.0.1 (python3
# -m http.server), and chromedriver (Debian's chromium and chromium-driver, as the Rust browser
# tests use: tests/harness/src/browser.rs); every wait is bounded, and everything is stopped and
# removed at the end, also on failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

say() { echo "cors-browser-test.sh: $*" >&2; }
fail() { say "$*"; exit 1; }

for tool in /usr/bin/chromium /usr/bin/chromedriver; do
  [ -x "$tool" ] || fail "$tool is missing; scripts/setup-tools.sh installs it"
done

scratch=$(mktemp -d)
database=cors_browser_$(date +%s)_$$
pids=()
driver=
session=
stop() {
  local status=$?
  trap - EXIT INT TERM
  # Closing the session closes Chromium; chromedriver's process group holds what is left.
  if [ -n "$session" ]; then curl -s -m 10 -X DELETE "$driver/session/$session" >/dev/null || true; fi
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  if [ -n "${driver_pid:-}" ]; then kill -TERM -- "-$driver_pid" 2>/dev/null || true; fi
  for pid in "${pids[@]}" ${driver_pid:-}; do wait "$pid" 2>/dev/null || true; done
  psql -q -h 127.0.0.1 -U postgres -d postgres -c "DROP DATABASE IF EXISTS $database" \
    >/dev/null 2>&1 || true
  if [ "$status" -ne 0 ]; then
    say "failed; the backend's log:"
    tail -n 40 "$scratch/backend.log" >&2 || true
  fi
  rm -rf "$scratch"
  exit "$status"
}
trap stop EXIT
trap 'exit 130' INT TERM

# Waits for the ready line `$2 listening on http://ADDRESS` in log $1 and prints ADDRESS.
address_from() {
  local line
  for _ in $(seq 1 300); do
    line=$(grep -m 1 "^$2 listening on http://" "$1" || true)
    if [ -n "$line" ]; then
      echo "${line##*http://}"
      return
    fi
    sleep 0.1
  done
  say "$2 did not start:"
  cat "$1" >&2
  return 1
}

# Polls URL $1 until it replies 2xx, for at most ten seconds.
wait_until_up() {
  for _ in $(seq 1 100); do
    curl -sf -m 2 "$1" >/dev/null && return
    sleep 0.1
  done
  fail "$1 did not come up"
}

# Two ports free on 127.0.0.1 a moment ago, one per line (the servers then bind them).
two_free_ports() {
  python3 -c '
import socket
held = [socket.socket() for _ in range(2)]
for s in held:
    s.bind(("127.0.0.1", 0))
print("\n".join(str(s.getsockname()[1]) for s in held))'
}

scripts/start-postgres.sh
psql -q -h 127.0.0.1 -U postgres -d postgres -c "CREATE DATABASE $database"
cargo build -q --locked -p backend -p bank-simulator --bins

{ read -r page_port; read -r other_port; } < <(two_free_ports)
page_origin=http://127.0.0.1:$page_port
other_origin=http://127.0.0.1:$other_port

# The page: pays with the key, bill and token in its URL's fragment, retries with the same key,
# and writes what it could read into #result (then sets data-done on <body>).
mkdir "$scratch/page"
cat >"$scratch/page/index.html" <<'HTML'
<!doctype html>
<meta charset="utf-8">
<title>Pay from another origin</title>
<pre id="result">pending</pre>
<script>
const given = new URLSearchParams(location.hash.slice(1));
const pay = () => fetch(`${given.get('api')}/v1/bills/${given.get('bill')}/pay`, {
  method: 'POST',
  headers: {
    'Authorization': `Bearer ${given.get('token')}`,
    'Content-Type': 'application/json',
    'Idempotency-Key': given.get('key'),
    'traceparent': '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
  },
  body: JSON.stringify({ amount_paise: 5000, payer_vpa: 'asha@okbank' }),
});
const show = (seen) => {
  document.querySelector('#result').textContent = JSON.stringify(seen);
  document.body.dataset.done = 'yes';
};
(async () => {
  const first = await pay();
  const retry = await pay();
  return {
    status: first.status,
    expires: first.headers.get('Idempotency-Expires'),
    location: first.headers.get('Location'),
    retry_status: retry.status,
    retry_replayed: retry.headers.get('Idempotent-Replayed'),
  };
})().then(show, (error) => show({ error: String(error) }));
</script>
HTML

for port in "$page_port" "$other_port"; do
  python3 -m http.server "$port" --bind 127.0.0.1 --directory "$scratch/page" \
    >"$scratch/page-$port.log" 2>&1 &
  pids+=($!)
  wait_until_up "http://127.0.0.1:$port/index.html"
done

target/debug/bank-simulator --listen 127.0.0.1:0 --seed 1 >"$scratch/bank.log" 2>&1 &
pids+=($!)
bank=http://$(address_from "$scratch/bank.log" "bank simulator")

export APP_ENV=development POLICY_FILE=policy.yaml RUST_LOG=${RUST_LOG:-warn}
export DATABASE_URL=postgres://postgres@127.0.0.1:5432/$database BANK_URL=$bank
export LISTEN_ADDR=127.0.0.1:0 ADMIN_ADDR=127.0.0.1:0 CORS_ALLOWED_ORIGINS=$page_origin
target/debug/backend serve >"$scratch/backend.log" 2>&1 &
pids+=($!)
api=http://$(address_from "$scratch/backend.log" "backend")
wait_until_up "$api/readyz"
token=$(target/debug/backend dev-token --user 42 --hours 1)

# chromedriver in a process group of its own, so that stop() reaches the Chromium it starts,
# and with the browser's profile in the scratch folder, removed with it.
{ read -r driver_port; } < <(two_free_ports)
mkdir "$scratch/tmp"
TMPDIR=$scratch/tmp setsid /usr/bin/chromedriver --port="$driver_port" >"$scratch/chromedriver.log" 2>&1 &
driver_pid=$!
driver=http://127.0.0.1:$driver_port
wait_until_up "$driver/status"

# Prints the value at the keys $@ of the JSON on stdin: a string as is, anything else as JSON,
# nothing if absent or null.
field() {
  python3 -c '
import json, sys
value = json.load(sys.stdin)
for key in sys.argv[1:]:
    value = value.get(key) if isinstance(value, dict) else None
print("" if value is None else value if isinstance(value, str) else json.dumps(value))' "$@"
}
# Sends WebDriver command $2 with method $1 and JSON body $3 to the session; prints the value.
webdriver() {
  curl -sf -m 30 -X "$1" "$driver/session/$session$2" -H 'Content-Type: application/json' \
    -d "$3" | field value
}

capabilities='{"capabilities": {"alwaysMatch": {"browserName": "chrome",
  "goog:chromeOptions": {"binary": "/usr/bin/chromium",
    "args": ["--headless=new", "--no-sandbox", "--disable-gpu"]}}}}'
session=$(curl -sf -m 60 -X POST "$driver/session" -H 'Content-Type: application/json' \
  -d "$capabilities" | field value sessionId)
[ -n "$session" ] || fail "chromedriver opened no session: $(tail -n 20 "$scratch/chromedriver.log")"

# Opens the page from origin $1 paying bill $2, and prints what it could read, as JSON.
pay_from_page() {
  local key url seen
  key=$(cat /proc/sys/kernel/random/uuid)
  url="$1/index.html#api=$api&bill=$2&key=$key&token=$token"
  webdriver POST /url "{\"url\": \"$url\"}" >/dev/null
  for _ in $(seq 1 200); do
    seen=$(webdriver POST /execute/sync '{"script": "return document.body.dataset.done === \"yes\" ? document.querySelector(\"#result\").textContent : null;", "args": []}')
    if [ -n "$seen" ]; then
      echo "$seen"
      return
    fi
    sleep 0.1
  done
  fail "the page on $1 showed nothing within 20 s"
}

# How many debits the bank's ledger holds.
debits() {
  curl -sf -m 5 "$bank/ledger" | python3 -c 'import json, sys; print(len(json.load(sys.stdin)["debits"]))'
}

allowed=$(pay_from_page "$page_origin" cors-1)
say "the page on $page_origin (listed) read: $allowed"
[ "$(echo "$allowed" | field status)" = 201 ] || fail "the listed origin's payment did not read as 201"
[ -n "$(echo "$allowed" | field expires)" ] || fail "the page could not read Idempotency-Expires"
[ -n "$(echo "$allowed" | field location)" ] || fail "the page could not read Location"
[ "$(echo "$allowed" | field retry_status)" = 201 ] || fail "the retry did not read as 201"
[ "$(echo "$allowed" | field retry_replayed)" = true ] \
  || fail "the page could not read Idempotent-Replayed on the retry"
[ "$(debits)" = 1 ] || fail "expected one debit after the payment and its retry, found $(debits)"

blocked=$(pay_from_page "$other_origin" cors-2)
say "the page on $other_origin (not listed) read: $blocked"
case "$(echo "$blocked" | field error)" in
  TypeError*) ;;
  *) fail "the unlisted origin's fetch was not blocked" ;;
esac
[ "$(debits)" = 1 ] || fail "the unlisted origin's payment reached the bank: $(debits) debits"
say "passed: the listed origin paid and read its headers; the other was blocked"
