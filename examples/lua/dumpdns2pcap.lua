#!/usr/bin/env -S dnsluice script
-- Writes the packets that carry DNS messages to a new pcap and says how many.
-- (dnsjit's dumpdns2pcap.lua.) A push chain driven by input:run(), with a
-- Lua function counting on the way.
--
-- Usage: dnsluice script examples/lua/dumpdns2pcap.lua IN.pcap OUT.pcap

local pcap_in, pcap_out = arg[1], arg[2]
if pcap_in == nil or pcap_out == nil then
    print("usage: " .. arg[0] .. " <pcap in> <pcap out>")
    os.exit(2)
end

local dnsluice = require("dnsluice")
local input = dnsluice.stage("input.mmpcap", { path = pcap_in })
local layer = dnsluice.stage("filter.layer")
local dns = dnsluice.stage("filter.dns")
local n = 0
local count = dnsluice.stage("filter.lua", function(obj)
    n = n + 1
    return true
end)
local output = dnsluice.stage("output.pcap", { path = pcap_out })

input:receiver(layer):receiver(dns):receiver(count):receiver(output)
input:run()
print(n .. " DNS messages dumped")
