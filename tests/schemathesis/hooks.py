"""Schemathesis hooks for scripts/schemathesis.sh (loaded through SCHEMATHESIS_HOOKS).

One key per user action (SPEC §3): a key sent again with another request is rightly refused
(422 idempotency-key-reused). Schemathesis draws keys from the document's pattern and repeats
them (the document's example, the smallest UUIDs), so every valid key already sent in this run
is swapped for a fresh version-4 UUID in the same spelling (quoted or bare, upper or lower case)
before the request goes out. Keys the pattern refuses are sent as drawn. The fresh keys are
derived from a counter, so a run with a fixed seed sends the same keys again (on a new database).
"""

import hashlib
import re
import uuid

import schemathesis

HEADER = "Idempotency-Key"
UUID_V4 = re.compile(
    r'(?P<quote>"?)(?P<uuid>[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-4[0-9A-Fa-f]{3}-[89ABab][0-9A-Fa-f]{3}-[0-9A-Fa-f]{12})(?P=quote)'
)
sent = set()


@schemathesis.hook
def before_call(context, case, kwargs):
    headers = case.headers or {}
    value = headers.get(HEADER)
    match = UUID_V4.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        return
    key = match["uuid"]
    if key.lower() in sent:
        digest = hashlib.sha256(f"schemathesis-key-{len(sent)}".encode()).digest()
        fresh = str(uuid.UUID(bytes=digest[:16], version=4))
        key = fresh.upper() if key.isupper() else fresh
        headers[HEADER] = f"{match['quote']}{key}{match['quote']}"
    sent.add(key.lower())


# Three refusals of schema-valid requests that the schema cannot prevent, each accepted only as
# itself (its operation, status and problem type):
# - the bank's decline (402 payment-declined): the script's bank simulator declines some debits,
#   so the document's 402 replies are checked too;
# - a refund of more than the payment has left (SPEC §7: at most what remains), a business rule;
#   schemathesis reuses payment ids seen in replies, so a refund after another may exceed it;
# - an amount written as a float with no fraction (`1118.0`): JSON Schema's `integer` admits it
#   and no keyword can tell it from `1118`, but SPEC §7 refuses floats (422 naming amount_paise).
REFUND = "POST /v1/payments/{payment_id}/refunds"
PAYMENTS = ("POST /v1/bills/{bill_id}/pay", REFUND)


@schemathesis.hook
def filter_failure(context, failure, case, response):
    if failure.code != "ST202" or response.status_code not in (402, 422):
        return True
    try:
        problem = response.json()
    except ValueError:
        return True
    kind = problem.get("type")
    label = case.operation.label
    if label in PAYMENTS and response.status_code == 402 and kind == "/problems/payment-declined":
        return False
    if label == REFUND and kind == "/problems/refund-exceeds-payment":
        return False
    amount = case.body.get("amount_paise") if isinstance(case.body, dict) else None
    float_amount = isinstance(amount, float) and amount.is_integer()
    refused_as_float = kind == "/problems/invalid-field" and problem.get("field") == "amount_paise"
    return not (label in PAYMENTS and float_amount and refused_as_float)
