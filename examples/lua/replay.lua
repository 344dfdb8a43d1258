#!/usr/bin/env -S dnsluice script
-- Replays the DNS queries of a capture against a server and reports what
-- came back (dnsjit's replay.lua). Answers are matched to their queries and
-- timed by output.dnscli; certificates are verified (give the CA with
-- --ca-file for a test server).
--
-- Usage: dnsluice script examples/lua/replay.lua [-t|-T|-H] [-R] [--ca-file F] [--tls-name N] PCAP HOST PORT
--   -t  TCP    -T  DNS-over-TLS    -H  DNS-over-HTTPS (HOST PORT make the URL)
--   -R  print every query's outcome (JSON: the query, the answer or error, the latency)

local transport, print_responses, ca_file, tls_name = "udp", false, nil, nil
local positional = {}
local i = 1
while arg[i] ~= nil do
    local a = arg[i]
    if a == "-t" then transport = "tcp"
    elseif a == "-T" then transport = "tls"
    elseif a == "-H" then transport = "https"
    elseif a == "-R" then print_responses = true
    elseif a == "--ca-file" then i = i + 1; ca_file = arg[i]
    elseif a == "--tls-name" then i = i + 1; tls_name = arg[i]
    else positional[#positional + 1] = a
    end
    i = i + 1
end
local pcap, host, port = positional[1], positional[2], positional[3]
if pcap == nil or host == nil or port == nil then
    print("usage: " .. arg[0] .. " [-t|-T|-H] [-R] [--ca-file F] [--tls-name N] <pcap> <host> <port>")
    os.exit(2)
end

local server = host .. ":" .. port
if transport == "https" then
    server = "https://" .. server .. "/dns-query"
end
local responses = nil
if print_responses then
    responses = os.tmpname()
end

local dnsluice = require("dnsluice")
local input = dnsluice.stage("input.mmpcap", { path = pcap })
local layer = dnsluice.stage("filter.layer")
local dns = dnsluice.stage("filter.dns")
local queries = dnsluice.stage("filter.select", { qr = "query" })
local client = dnsluice.stage("output.dnscli", {
    server = server,
    transport = transport,
    ca_file = ca_file,
    tls_name = tls_name,
    responses = responses,
})

local started = os.clock() -- processor time: Lua has no finer wall clock
input:receiver(layer):receiver(dns):receiver(queries):receiver(client)
input:run()
local runtime = os.clock() - started

if responses ~= nil then
    for line in io.lines(responses) do
        print(line)
    end
    os.remove(responses)
end

local counts = {}
for _, stage in ipairs(input:stats()) do
    counts[stage.module] = stage
end
local packets = counts["input.mmpcap"].output
local c = counts["output.dnscli"].counters
print("cpu_seconds", string.format("%.3f", runtime))
print("packets", packets)
print("queries", c.sent or 0)
print("answered", c.answered or 0)
print("timeouts", c.timeouts or 0)
print("errors", c.errors or 0)
