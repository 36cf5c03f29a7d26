-- wrk script: POST one fixed JSON body; body and headers come from the environment,
-- so one script serves every scenario:
--   BENCH_BODY_FILE  path of the JSON body
--   BENCH_HEADERS    extra headers, "Name: value" lines separated by newlines
local fh = assert(io.open(assert(os.getenv("BENCH_BODY_FILE"), "BENCH_BODY_FILE unset"), "rb"))
wrk.body = fh:read("*a")
fh:close()
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
for line in (os.getenv("BENCH_HEADERS") or ""):gmatch("[^\n]+") do
  local name, value = line:match("^%s*([^:]+):%s*(.-)%s*$")
  if name then wrk.headers[name] = value end
end

-- One machine-readable line for the harness. errors.status counts answers with status > 399.
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests":%d,"duration_us":%d,"bytes":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"latency_us":{"p50":%d,"p90":%d,"p99":%d,"mean":%.1f,"max":%d}}\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.mean, latency.max))
end
