-- wrk script: replays spread over KEYS distinct keys (default 100,000), each request a key drawn
-- at random: a key's first request pays (new work), every later one replays it.
-- (bench/memory.sh stops wrk once the backend has replied to the requests it wants.)
local body = '{"amount_paise":230000,"payer_vpa":"asha@okbank"}'
local keys = tonumber(os.getenv("KEYS") or "100000")

function setup(thread)
  thread:set("id", math.random(1, 1e9))
end

function init(args)
  math.randomseed(id)
end

function request()
  -- A valid v4 key per index: version nibble 4, variant 8.
  local key = string.format("%08x-0000-4000-8000-%012x", math.random(1, keys), 0)
  wrk.headers["Idempotency-Key"] = key
  wrk.headers["Content-Type"] = "application/json"
  return wrk.format("POST", "/v1/bills/elec-memory/pay", nil, body)
end
