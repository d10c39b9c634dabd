-- wrk script: every request repeats one finished payment (same key, same body): all replays.
local body = '{"amount_paise":230000,"payer_vpa":"asha@okbank"}'

function request()
  wrk.headers["Idempotency-Key"] = os.getenv("REPLAY_KEY")
  wrk.headers["Content-Type"] = "application/json"
  return wrk.format("POST", "/v1/bills/elec-replay/pay", nil, body)
end
