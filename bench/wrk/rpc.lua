-- wrk script for Cairn's benchmark. Run with ONE thread (-t1): requests cycle through a file in order.
--
--   wrk -t1 -c8 -d10s -s bench/wrk/rpc.lua http://127.0.0.1:18081 -- <path> [<file> [<start>]]
--
-- Without <file>: GET <path> (the Agent Card).
-- With <file>: one request per line of <file>, sent in order from line <start> (1-based, default 1):
--   "<bearer token>\t<JSON body>"   POST <path> (empty token: no Authorization header);
--   "/<path>"                      GET that path (HTTP+JSON's reads), with A2A-Version 1.0.
-- A file of single-use requests (SendMessage contributions) must not wrap: the summary says if it did.
-- A response that is not HTTP 200 or whose body holds a JSON-RPC/refusal "error" counts as a failure.
-- done() prints one line: BENCH_JSON {...}, which bench/bench.py reads.

-- Globals on purpose: done() reads them from each thread with thread:get().
requests_ = {}
index = 0
start = 1
path = "/"
failures = 0
wrapped = 0
first_failure = ""
local threads = {}

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  path = args[1] or "/"
  local file = args[2]
  start = tonumber(args[3] or "1")
  if file == nil or file == "" then
    table.insert(requests_, wrk.format("GET", path, {["Accept"] = "application/json"}))
  else
    for line in io.lines(file) do
      local tab = line:find("\t", 1, true)
      if line:sub(1, 1) == "/" then
        table.insert(requests_, wrk.format("GET", line, {["Accept"] = "application/a2a+json", ["A2A-Version"] = "1.0"}))
      elseif tab then
        local token = line:sub(1, tab - 1)
        local body = line:sub(tab + 1)
        local headers = {["Content-Type"] = "application/json", ["A2A-Version"] = "1.0"}
        if #token > 0 then headers["Authorization"] = "Bearer " .. token end
        table.insert(requests_, wrk.format("POST", path, headers, body))
      end
    end
  end
  if #requests_ == 0 then error("no requests to send") end
  index = start - 1
end

function request()
  index = index + 1
  if index > #requests_ then
    index = 1
    wrapped = wrapped + 1
  end
  return requests_[index]
end

function response(status, headers, body)
  if status ~= 200 or (body and body:find('"error":', 1, true)) then
    failures = failures + 1
    if first_failure == "" then
      first_failure = tostring(status) .. " " .. (body or ""):sub(1, 300)
    end
  end
end

local function json_string(text)
  return '"' .. text:gsub('\\', '\\\\'):gsub('"', '\\"'):gsub('\n', ' '):gsub('\r', ' '):gsub('\t', ' ') .. '"'
end

function done(summary, latency, requests)
  local total_failures, total_wrapped, last_index, sample = 0, 0, 0, ""
  for _, thread in ipairs(threads) do
    total_failures = total_failures + (thread:get("failures") or 0)
    total_wrapped = total_wrapped + (thread:get("wrapped") or 0)
    last_index = thread:get("index") or 0
    if sample == "" then sample = thread:get("first_failure") or "" end
  end
  local seconds = summary.duration / 1e6
  local errors = summary.errors
  io.write(string.format(
    'BENCH_JSON {"requests":%d,"seconds":%.3f,"rps":%.1f,"p50_ms":%.3f,"p90_ms":%.3f,"p99_ms":%.3f,' ..
    '"max_ms":%.3f,"mean_ms":%.3f,"failures":%d,"socket_errors":%d,"non_2xx":%d,"wrapped":%d,' ..
    '"last_index":%d,"first_failure":%s}\n',
    summary.requests, seconds, summary.requests / seconds,
    latency:percentile(50) / 1000, latency:percentile(90) / 1000, latency:percentile(99) / 1000,
    latency.max / 1000, latency.mean / 1000, total_failures,
    errors.connect + errors.read + errors.write + errors.timeout, errors.status, total_wrapped, last_index,
    json_string(sample)))
end
