#!/usr/bin/env -S dnsluice script
-- Matches queries with their responses (same id, addresses and ports
-- swapped) and prints one line per pair: source, destination, id, the
-- response's rcode, qname, qtype, and the latency in milliseconds.
-- (dnsjit's dumpdns-qr.lua, plus latency; matching by a key, not a double loop.)
--
-- Usage: dnsluice script examples/lua/dumpdns-qr.lua FILE.pcap

local pcap = arg[1]
if pcap == nil then
    print("usage: " .. arg[0] .. " <pcap>")
    os.exit(2)
end

local input = require("dnsluice.input.mmpcap").new { path = pcap }
local layer = require("dnsluice.filter.layer").new()
local dns = require("dnsluice.filter.dns").new()
dns:producer(layer:producer(input))

local function key(client, cport, server, sport, id)
    return client .. "|" .. cport .. "|" .. server .. "|" .. sport .. "|" .. id
end

local queries = {}   -- in capture order
local responses = {} -- key -> list of responses
for obj in dns:iter() do
    local m = obj.dns
    if m.id ~= nil and obj.src ~= nil then
        if m.qr then
            local k = key(obj.dst, obj.dport, obj.src, obj.sport, m.id)
            local list = responses[k] or {}
            list[#list + 1] = { rcode = m.rcode, ts = obj.ts }
            responses[k] = list
        elseif m.qname ~= nil then
            queries[#queries + 1] = {
                key = key(obj.src, obj.sport, obj.dst, obj.dport, m.id),
                src = obj.src, dst = obj.dst, id = m.id,
                qname = m.qname, qtype = m.qtype, ts = obj.ts,
            }
        end
    end
end

print("src", "dst", "id", "rcode", "qname", "qtype", "latency_ms")
for _, q in ipairs(queries) do
    for _, r in ipairs(responses[q.key] or {}) do
        local latency = "-"
        if q.ts ~= nil and r.ts ~= nil then
            latency = string.format("%.3f", (r.ts - q.ts) * 1000)
        end
        print(q.src, q.dst, q.id, r.rcode, q.qname, q.qtype, latency)
    end
end
