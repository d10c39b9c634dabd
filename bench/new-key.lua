-- wrk script: every request pays a bill with a fresh random v4 Idempotency-Key (new work each time).
local body = '{"amount_paise":230000,"payer_vpa":"asha@okbank"}'
local counter = 0

function init(args)
  math.randomseed(os.time() * 1000 + (tonumber(args[1]) or 0) + math.floor(os.clock() * 1e6))
end

local function uuid4()
  return (string.gsub('xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx', '[xy]', function(c)
    local v = (c == 'x') and math.random(0, 15) or math.random(8, 11)
    return string.format('%x', v)
  end))
end

function request()
  counter = counter + 1
  wrk.headers["Idempotency-Key"] = uuid4()
  wrk.headers["Content-Type"] = "application/json"
  return wrk.format("POST", "/v1/bills/elec-" .. counter .. "/pay", nil, body)
end
