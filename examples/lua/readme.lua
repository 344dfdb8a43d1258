#!/usr/bin/env -S dnsluice script
-- The smallest useful script: the id of every DNS message in a capture.
-- (dnsjit's readme.lua, with dnsluice's API.)
--
-- Usage: dnsluice script examples/lua/readme.lua FILE.pcap

local input = require("dnsluice.input.mmpcap").new { path = arg[1] }
local layer = require("dnsluice.filter.layer").new()
local dns = require("dnsluice.filter.dns").new()

-- dns pulls from layer, which pulls from input.
dns:producer(layer:producer(input))

for obj in dns:iter() do
    print(obj.dns.id)
end
