#!/usr/bin/env -S dnsluice script
-- Every DNS message of a capture, as text: the flow, then the header,
-- question and records. (dnsjit's dumpdns.lua, with dnsluice's API: TCP
-- streams are reassembled and fragmented datagrams defragmented by filter.dns.)
--
-- Usage: dnsluice script examples/lua/dumpdns.lua FILE.pcap

local pcap = arg[1]
if pcap == nil then
    print("usage: " .. arg[0] .. " <pcap>")
    os.exit(2)
end
-- dump.lua sits beside this script.
package.path = (arg[0]:match("^(.*[/\\])") or "./") .. "?.lua;" .. package.path
local dump = require("dump")

local input = require("dnsluice.input.mmpcap").new { path = pcap }
local layer = require("dnsluice.filter.layer").new()
local dns = require("dnsluice.filter.dns").new()
dns:producer(layer:producer(input))

for obj in dns:iter() do
    dump.message(obj)
end
