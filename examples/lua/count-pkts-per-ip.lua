#!/usr/bin/env -S dnsluice script
-- Packets per IP address: each packet counts once for its source and once
-- for its destination address. Prints "address packets", most packets first.
-- (dnsjit's count-pkts-per-ip.lua.)
--
-- Usage: dnsluice script examples/lua/count-pkts-per-ip.lua FILE.pcap

local pcap = arg[1]
if pcap == nil then
    print("usage: " .. arg[0] .. " <pcap>")
    os.exit(2)
end

local input = require("dnsluice.input.mmpcap").new { path = pcap }
local layer = require("dnsluice.filter.layer").new()
layer:producer(input)

local packets = {}
for obj in layer:iter() do
    local src, dst = obj.src, obj.dst
    if src ~= nil then
        packets[src] = (packets[src] or 0) + 1
        packets[dst] = (packets[dst] or 0) + 1
    end
end

local addresses = {}
for address in pairs(packets) do addresses[#addresses + 1] = address end
table.sort(addresses, function(a, b)
    if packets[a] ~= packets[b] then return packets[a] > packets[b] end
    return a < b
end)
for _, address in ipairs(addresses) do
    print(address, packets[address])
end
