#!/usr/bin/env -S dnsluice script
-- The id and addresses of every DNS message with a given RCODE.
-- (dnsjit's filter_rcode.lua.) Shows a push chain with a Lua function in
-- the middle (filter.lua) and a module written in Lua at the end.
--
-- Usage: dnsluice script examples/lua/filter_rcode.lua FILE.pcap RCODE
-- RCODE is a number (3 = NXDOMAIN); with EDNS it is the extended RCODE.

local pcap, rcode = arg[1], tonumber(arg[2])
if pcap == nil or rcode == nil then
    print("usage: " .. arg[0] .. " <pcap> <rcode>")
    os.exit(2)
end

local dnsluice = require("dnsluice")
local input = require("dnsluice.input.mmpcap").new { path = pcap }
local layer = require("dnsluice.filter.layer").new()
local dns = require("dnsluice.filter.dns").new()

-- A Lua function per object: true passes it on.
local keep = require("dnsluice.filter.lua").new(function(obj)
    return obj.dns.rcode_code == rcode
end)

-- A module written in Lua: receives what `keep` passes on.
local printer = dnsluice.module {
    receive = function(self, obj)
        print(obj.dns.id, obj.src .. " -> " .. obj.dst)
    end,
}

input:receiver(layer):receiver(dns):receiver(keep):receiver(printer)
input:run()
