-- wrk's side of `sgam bench service` (sgam/bench/service.py): one wrk thread POSTs the plan's
-- request bodies in order over all its connections and stops once the plan's count is answered;
-- done() prints what was measured as one JSON line, the latencies as a histogram in microseconds
-- (exact: wrk keeps one bucket a microsecond), so rounds can be merged into one p50 and p99.
--
-- Arguments after `--`: the path, the file of bodies (one JSON document a line), how many answers
-- to wait for, and the rate of all connections together in requests a second (0: flat out).
-- The key comes from SGAM_BENCH_KEY, not from the command line, which every user can read.

local ffi = require("ffi")
ffi.cdef [[
typedef struct { long tv_sec; long tv_nsec; } sgam_timespec;
int clock_gettime(int clock, sgam_timespec *t);
int getpid(void);
int tgkill(int tgid, int tid, int sig);
typedef struct { long tv_sec; long tv_usec; } sgam_timeval;
typedef struct { sgam_timeval utime; sgam_timeval stime; long rest[14]; } sgam_rusage;
int getrusage(int who, sgam_rusage *usage);
]]
local CLOCK_MONOTONIC, SIGINT = 1, 2
local clock = ffi.new("sgam_timespec")

local function now_ms()
  ffi.C.clock_gettime(CLOCK_MONOTONIC, clock)
  return tonumber(clock.tv_sec) * 1000 + tonumber(clock.tv_nsec) / 1e6
end

local threads = {}
local bodies, next_body, wanted, answered = {}, 0, 0, 0
local interval, started, scheduled = 0, nil, 0
-- Globals, read by done() through thread:get: sends that left more than 1 ms after they were due
-- (all connections were busy), and the largest such delay. wrk counts a request's latency from
-- when it is sent, so these say how far the paced figures are from counting it from when it was due.
late, worst_ms = 0, 0
-- wrk's CPU time (user + system, in microseconds) when the last answer came in: what the load cost,
-- without done()'s walk over the latency buckets.
cpu_us = 0

function setup(thread)
  threads[#threads + 1] = thread
end

function init(args)
  local path, file = args[1], args[2]
  wanted = tonumber(args[3])
  local rate = tonumber(args[4])
  local headers = { ["Content-Type"] = "application/json",
                    ["Authorization"] = "Bearer " .. os.getenv("SGAM_BENCH_KEY") }
  for line in io.lines(file) do
    bodies[#bodies + 1] = wrk.format("POST", path, headers, line)
  end
  if rate > 0 then
    interval = 1000 / rate
  else
    -- Without a delay() wrk sends the next request as soon as the answer is in (no timer).
    delay = nil
  end
end

function delay()
  local now = now_ms()
  started = started or now
  local due = started + scheduled * interval
  scheduled = scheduled + 1
  if now - due > 1 then
    late = late + 1
    worst_ms = math.max(worst_ms, now - due)
  end
  return math.max(0, math.floor(due - now + 0.5))
end

function request()
  next_body = next_body % #bodies + 1
  return bodies[next_body]
end

function response(status, headers, body)
  answered = answered + 1
  if answered >= wanted then
    local usage = ffi.new("sgam_rusage")
    ffi.C.getrusage(0, usage)  -- RUSAGE_SELF: the whole wrk process
    cpu_us = tonumber(usage.utime.tv_sec + usage.stime.tv_sec) * 1e6 + tonumber(usage.utime.tv_usec + usage.stime.tv_usec)
    wrk.thread:stop()
    -- wrk's main thread sleeps for the whole -d duration; SIGINT (its Ctrl-C) wakes it to
    -- collect the threads and call done() now. Sent to that thread itself (its id is the pid),
    -- since a signal to the process may land on this thread and leave the sleep running.
    local pid = ffi.C.getpid()
    ffi.C.tgkill(pid, pid, SIGINT)
  end
end

function done(summary, latency, requests)
  local buckets, i = {}, 1
  while true do
    -- latency(i) is the i-th distinct latency and its count; past the last one wrk 4.1 gives the
    -- value 0 and a stale count, so the value says where the list ends (no request takes 0 us).
    local value, count = latency(i)
    if value == 0 then break end
    buckets[#buckets + 1] = string.format("[%d,%d]", value, count)
    i = i + 1
  end
  local late_sends, worst, cpu = 0, 0, 0
  for _, thread in ipairs(threads) do
    late_sends = late_sends + thread:get("late")
    worst = math.max(worst, thread:get("worst_ms"))
    cpu = math.max(cpu, thread:get("cpu_us"))
  end
  local e = summary.errors
  io.write(string.format(
    '{"requests":%d,"duration_us":%d,"errors":%d,"late":%d,"worst_late_ms":%.1f,"cpu_us":%d,"latency_us":[%s]}\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.status + e.timeout,
    late_sends, worst, cpu, table.concat(buckets, ",")))
end
