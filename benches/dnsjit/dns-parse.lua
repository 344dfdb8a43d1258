#!/usr/bin/env dnsjit
-- Baseline for benches/vs-dnsjit.sh (pair dns-parse): read a pcap with
-- input.mmpcap, parse the ether/IP/UDP stack with filter.layer, and in a
-- plain Lua loop parse the DNS header and first question of every UDP
-- payload (the same calls dnsjit's examples/dumpdns-qr.lua makes:
-- dns:parse_header(), then dns:parse_q(q, labels, 16) if qdcount > 0).
-- Prints the number of DNS messages whose header (and question, if any)
-- parsed.
--
-- Usage: dnsjit benches/dnsjit/dns-parse.lua FILE [EXPECT]
--
-- If EXPECT is given and the count differs, or if any UDP payload failed
-- to parse, it says so on stderr and exits 1.
--
-- Note: dnsjit puts the script path in arg[1]; user arguments start at arg[2].

local file = arg[2]
local expect = arg[3]
if file == nil then
    io.stderr:write("usage: dnsjit " .. tostring(arg[1]) .. " FILE [EXPECT]\n")
    os.exit(2)
end

local object = require("dnsjit.core.objects")
local input = require("dnsjit.input.mmpcap").new()
local layer = require("dnsjit.filter.layer").new()
local dns = require("dnsjit.core.object.dns").new()
local labels = require("dnsjit.core.object.dns.label").new(16)
local q = require("dnsjit.core.object.dns.q").new()

if input:open(file) ~= 0 then
    io.stderr:write("mmpcap: cannot open " .. file .. "\n")
    os.exit(1)
end
layer:producer(input)
local produce, ctx = layer:produce()

local PAYLOAD, UDP = object.PAYLOAD, object.UDP
local n, bad, other = 0, 0, 0
while true do
    local obj = produce(ctx)
    if obj == nil then break end
    -- layer:produce() hands out the top-most object; for a UDP packet that
    -- is the payload, whose obj_prev is the UDP header.
    local prev = obj.obj_prev
    if obj.obj_type == PAYLOAD and prev ~= nil and prev.obj_type == UDP then
        dns.obj_prev = obj
        if dns:parse_header() == 0 and (dns.qdcount == 0 or dns:parse_q(q, labels, 16) == 0) then
            n = n + 1
        else
            bad = bad + 1
        end
    else
        other = other + 1
    end
end

print(n)

local fail = false
if bad > 0 then
    io.stderr:write("dns-parse: " .. bad .. " UDP payloads failed to parse as DNS\n")
    fail = true
end
if expect ~= nil and n ~= tonumber(expect) then
    io.stderr:write("dns-parse: counted " .. n .. " DNS messages, expected " .. expect ..
        " (" .. other .. " non-UDP-payload objects)\n")
    fail = true
end
if fail then os.exit(1) end
