#!/usr/bin/env -S dnsluice script
-- Live capture: every DNS message seen on an interface, as dumpdns.lua
-- prints them. Needs dnsluice built with the `libpcap` feature (input.pcap)
-- and the right to capture (root or CAP_NET_RAW).
--
-- Usage: dnsluice script examples/lua/capture.lua INTERFACE [COUNT [PORT]]
-- (COUNT: stop after that many packets; PORT: the DNS port, 53 by default)

local interface = arg[1]
if interface == nil then
    print("usage: " .. arg[0] .. " <interface> [packet count [port]]")
    os.exit(2)
end
package.path = (arg[0]:match("^(.*[/\\])") or "./") .. "?.lua;" .. package.path
local dump = require("dump")

local dnsluice = require("dnsluice")
local port = tonumber(arg[3] or "53")
local options = { interface = interface, filter = "port " .. port }
if arg[2] ~= nil then options.count = tonumber(arg[2]) end
local input = dnsluice.stage("input.pcap", options)
local layer = dnsluice.stage("filter.layer")
local dns = dnsluice.stage("filter.dns", { ports = { port } })
dns:producer(layer:producer(input))

for obj in dns:iter() do
    dump.message(obj)
    io.stdout:flush()
end
